"""``aiconsole local predict``'s child: run by the local Python (``$AICONSOLE_LOCAL_PYTHON`` or
``python`` on PATH, whichever has the model's framework), by path, with no console code, as
gcloud's local prediction ran in the user's own environment.

    python local_predictor.py WORKER_PY < {"modelDir", "framework", "signature", "instances"}

It loads the model with the console's own serving code (``models_registry/serving/worker.py``,
standalone too, so a model predicts here as it would once deployed) and writes one JSON object:
``{"predictions": [...]}``, or ``{"error": "..."}`` with exit status 1.
"""

import importlib.util
import json
import os
import sys

# Not this folder first on the path: its packaging.py or logs.py would hide the libraries' own.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

# The model file each framework's serving loads first (models_registry.files.MODEL_FILES' order).
MODEL_FILES = (
    ("TENSORFLOW", ("saved_model.pb",)),
    ("XGBOOST", ("model.bst", "model.json", "model.ubj")),
    ("SCIKIT_LEARN", ("model.joblib", "model.pkl")),
)


def _fail(message):
    print(json.dumps({"error": message}))
    return 1


def main(argv):
    spec = importlib.util.spec_from_file_location("aiconsole_serving_worker", argv[1])
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    request = json.load(sys.stdin)
    model_dir, framework = request["modelDir"], request.get("framework")
    try:
        names = set(os.listdir(model_dir))
    except OSError as error:
        return _fail(f"--model-dir {model_dir}: {error.strerror or error}")
    found = [
        (kind, name)
        for kind, files in MODEL_FILES
        for name in files
        if name in names
        and (framework is None or kind == framework or (framework == "XGBOOST" and kind == "SCIKIT_LEARN"))
    ]
    if not found:
        wanted = ", ".join(name for kind, files in MODEL_FILES for name in files if framework in (None, kind))
        return _fail(
            f"--model-dir {model_dir} holds no model file for {framework or 'any framework'}: expected one of {wanted}"
        )
    kind, model_file = found[0]
    try:
        predictor = worker.PREDICTORS[framework or kind](model_dir, model_file, request.get("signature"))
        predictions = predictor.predict(request["instances"], {"signature_name": request.get("signature")})
    except worker.LoadError as error:
        return _fail(f"cannot load the model in {model_dir}: {error}")
    except ImportError as error:
        return _fail(
            f"{sys.executable} cannot load a {framework or kind} model: {error}. Run with the Python "
            "of an environment that has it ($AICONSOLE_LOCAL_PYTHON)"
        )
    except Exception as error:  # the model's own failure, in its words, as a deployed version answers
        return _fail(f"Prediction failed: {type(error).__name__}: {str(error).strip()[:2000]}")
    print(json.dumps({"predictions": predictions}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
