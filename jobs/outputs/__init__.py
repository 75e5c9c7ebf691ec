"""A job's outputs: the files under its job dir (a trial's under ``<jobDir>/<trialId>``, a batch
prediction's under its output path), local or ``gs://``, listed, previewed and downloaded from the
console (``files`` the service, ``views`` the pages)."""
