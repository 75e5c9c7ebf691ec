// The batch prediction form: the output folder follows the job id while it is the suggested one
// (<predictions folder>/<job id>), so each job writes to a folder of its own. The form works
// without this: an empty output path gets the same folder on the server.
(function () {
  "use strict";
  const jobId = document.getElementById("batch-job");
  const output = document.querySelector("#batch-output[data-follows-job-id]");
  if (!jobId || !output) return;
  const base = output.dataset.followsJobId;
  let previous = jobId.value;
  jobId.addEventListener("input", function () {
    if (output.value === base + previous) output.value = base + jobId.value;
    previous = jobId.value;
  });
})();
