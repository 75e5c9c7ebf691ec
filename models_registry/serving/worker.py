"""The serving process: run by a runtime environment's Python, by path, with no console code.

It imports nothing from the console (Django is not installed in runtime environments) and holds
none of its secrets. Two roles, one file:

``zygote``: started once per runtime environment. It imports the heavy libraries (numpy,
scikit-learn, XGBoost) once, then waits on its control socket. Each ``spawn`` message carries two
file descriptors (SCM_RIGHTS): a stream socket to the console and the write end of a log pipe.
The zygote forks; the child keeps the already-imported libraries, loads one model and serves it.
A new serving process is therefore ready in milliseconds plus the model's own load time, instead
of the seconds that importing scikit-learn takes.

``serve``: the forked child. It answers framed requests on its socket, one at a time:

    request:  1 byte kind (P online, B batch, Q quit) + 4 bytes big-endian length + payload
    response: 1 byte code (0 ok, 1 invalid argument, 2 prediction failed, 3 internal) + length + payload

P's payload is the HTTP body as the client sent it (``{"instances": [...]}``); its answer is the
response body (``{"predictions": [...]}``), so JSON is decoded and encoded once, here. B's payload
is a JSON list of instances and its answer the JSON list of predictions. The first message a
child sends is its readiness (code 0, JSON) or why its model did not load (code 3, text).

A serving process ends when its socket closes (the console stopped it or went away); the zygote
ends when its control socket closes.
"""

import gc
import json
import os
import signal
import socket
import struct
import sys
import time
import traceback

OK, INVALID, FAILED, INTERNAL = 0, 1, 2, 3
HEADER = struct.Struct(">BI")
PRELOAD = (
    "numpy",
    "scipy",
    "joblib",
    "sklearn",
    "sklearn.base",
    "sklearn.linear_model",
    "sklearn.tree",
    "sklearn.ensemble",
    "sklearn.pipeline",
    "sklearn.preprocessing",
    "sklearn.svm",
    "sklearn.neighbors",
    "sklearn.naive_bayes",
    "sklearn.feature_extraction",
    "sklearn.compose",
    "sklearn.impute",
    "xgboost",
)
BUFFER = 1 << 16


class LoadError(Exception):
    """The model cannot be served; the message becomes the version's errorMessage."""


# --- framing --------------------------------------------------------------------------------------


def read_exact(sock, size):
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:], size - got)
        if not count:
            raise EOFError
        got += count
    return buffer


def read_request(sock):
    head = read_exact(sock, HEADER.size)
    kind, size = HEADER.unpack(head)
    return kind, read_exact(sock, size) if size else b""


def send(sock, code, payload):
    sock.sendall(HEADER.pack(code, len(payload)) + payload)


# --- models -----------------------------------------------------------------------------------------


def _as_list(result):
    return result.tolist() if hasattr(result, "tolist") else list(result)


def _describe(error):
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _load_pickle(path):
    if path.endswith(".joblib"):
        import joblib

        return joblib.load(path)
    import pickle

    with open(path, "rb") as handle:
        return pickle.load(handle)


class SklearnPredictor:
    name = "sklearn"

    def __init__(self, model_dir, model_file, signature):
        self.model = _load_pickle(os.path.join(model_dir, model_file))
        if not hasattr(self.model, "predict"):
            raise LoadError(
                f"{model_file} holds a {type(self.model).__name__}, which has no predict method: "
                "save a fitted scikit-learn estimator or pipeline."
            )

    def predict(self, instances, request):
        return _as_list(self.model.predict(instances))


class XgboostPredictor:
    name = "xgboost"

    def __init__(self, model_dir, model_file, signature):
        import xgboost

        self.xgboost = xgboost
        path = os.path.join(model_dir, model_file)
        if model_file.endswith((".joblib", ".pkl")):
            self.model = _load_pickle(path)
        else:
            self.model = xgboost.Booster()
            self.model.load_model(path)
        self.booster = isinstance(self.model, xgboost.Booster)
        if not self.booster and not isinstance(self.model, xgboost.XGBModel):
            raise LoadError(
                f"{model_file} holds a {type(self.model).__name__}, not an XGBoost model (a Booster, "
                "or an XGBModel such as XGBClassifier): the version's framework is not XGBOOST."
            )

    def predict(self, instances, request):
        import numpy

        if any(isinstance(instance, dict) for instance in instances):
            raise ValueError("XGBoost models take each instance as a list of numbers, not an object.")
        data = numpy.asarray(instances, dtype=numpy.float32)
        if data.ndim == 1:
            data = data.reshape(-1, 1)  # each instance a single number
        if data.ndim != 2:
            raise ValueError(f"instances must be lists of numbers (a 2-D array); got {data.ndim} dimensions.")
        if self.booster:
            try:
                return _as_list(self.model.inplace_predict(data))
            except AttributeError:
                return _as_list(self.model.predict(self.xgboost.DMatrix(data)))
        return _as_list(self.model.predict(data))


class TensorflowPredictor:
    name = "tensorflow"

    def __init__(self, model_dir, model_file, signature):
        try:
            import tensorflow
        except ImportError as error:
            raise LoadError(
                "TensorFlow is not installed in this runtime version's serving environment "
                f"(Python {sys.version_info[0]}.{sys.version_info[1]}): {error}. Deploy the version on a "
                "runtime version with TensorFlow (every one of the original's has it)."
            ) from None
        self.tf = tensorflow
        try:
            self.loaded = tensorflow.saved_model.load(model_dir)
        except Exception as error:
            raise LoadError(
                f"Could not load the SavedModel in {os.path.basename(model_dir.rstrip('/'))}: "
                f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"
            ) from None
        self.default_signature = signature or "serving_default"
        if self.default_signature not in self.loaded.signatures:
            raise LoadError(
                f"The SavedModel has no signature {self.default_signature!r}; it has "
                f"{', '.join(self.loaded.signatures) or 'none'}."
            )

    def _decode(self, value):
        if isinstance(value, dict) and set(value) == {"b64"}:
            import base64

            return base64.b64decode(value["b64"])
        if isinstance(value, list):
            return [self._decode(item) for item in value]
        return value

    def predict(self, instances, request):
        name = request.get("signature_name") or self.default_signature
        if name not in self.loaded.signatures:
            raise ValueError(f"The model has no signature {name!r}.")
        function = self.loaded.signatures[name]
        specs = function.structured_input_signature[1]
        if all(isinstance(instance, dict) for instance in instances):
            columns = {key: [self._decode(instance.get(key)) for instance in instances] for key in specs}
        elif len(specs) == 1:
            columns = {next(iter(specs)): [self._decode(instance) for instance in instances]}
        else:
            raise ValueError(
                f"The signature takes {len(specs)} inputs ({', '.join(specs)}): give each instance "
                "as an object with those names."
            )
        outputs = function(**{key: self.tf.constant(value, dtype=specs[key].dtype) for key, value in columns.items()})
        values = {key: tensor.numpy() for key, tensor in outputs.items()}
        if len(values) == 1:
            return _as_list(next(iter(values.values())))
        return [
            {
                key: _as_list(value[index]) if hasattr(value[index], "tolist") else value[index]
                for key, value in values.items()
            }
            for index in range(len(instances))
        ]


PREDICTORS = {"SCIKIT_LEARN": SklearnPredictor, "XGBOOST": XgboostPredictor, "TENSORFLOW": TensorflowPredictor}


# --- serving ------------------------------------------------------------------------------------------


def _invalid(message):
    return INVALID, message.encode()


def online(predictor, payload):
    """One online request: the HTTP body in, the HTTP body (or a refusal) out."""
    try:
        request = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as error:
        return _invalid(f"Invalid JSON payload received. {error}.")
    except RecursionError:  # the decoder's own limit, a few hundred levels: no model takes that
        return _invalid("Invalid JSON payload received. The body nests too deeply.")
    if not isinstance(request, dict):
        return _invalid('Invalid JSON payload received. Expected an object such as {"instances": [[1.0, 2.0]]}.')
    instances = request.get("instances")
    if not isinstance(instances, list):
        return _invalid(
            'The request body must hold "instances": a list with one entry per instance, '
            'e.g. {"instances": [[1.0, 2.0]]}.'
        )
    if not instances:
        return _invalid('"instances" is empty: send at least one instance.')
    try:
        predictions = predictor.predict(instances, request)
        if len(predictions) != len(instances):
            raise ValueError(f"the model returned {len(predictions)} predictions for {len(instances)} instances")
        body = json.dumps(predictions, separators=(",", ":"))
    except Exception as error:
        return FAILED, f"Prediction failed: Exception during {predictor.name} prediction: {_describe(error)}".encode()
    return OK, b'{"predictions":' + body.encode() + b"}"


def batch(predictor, payload):
    try:
        instances = json.loads(payload)
        predictions = predictor.predict(instances, {})
        if len(predictions) != len(instances):
            raise ValueError(f"the model returned {len(predictions)} predictions for {len(instances)} instances")
        return OK, json.dumps(predictions, separators=(",", ":")).encode()
    except Exception as error:
        return FAILED, f"Exception during {predictor.name} prediction: {_describe(error)}".encode()


def serve(channel, spec):
    started = time.monotonic()
    try:
        framework = spec["framework"]
        if framework not in PREDICTORS:
            raise LoadError(f"Unknown framework {framework!r}.")
        predictor = PREDICTORS[framework](spec["modelDir"], spec["modelFile"], spec.get("signature"))
    except LoadError as error:
        send(channel, INTERNAL, str(error).encode())
        return 1
    except BaseException as error:  # a pickle runs arbitrary code: anything can come out of it
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        send(channel, INTERNAL, f"Could not load {spec.get('modelFile')}: {_describe(error)}".encode())
        return 1
    gc.freeze()  # the model lives as long as the process: keep the collector's full passes off it
    ready = {"ready": True, "pid": os.getpid(), "loadSeconds": round(time.monotonic() - started, 4)}
    send(channel, OK, json.dumps(ready).encode())
    handlers = {ord("P"): online, ord("B"): batch}
    while True:
        try:
            kind, payload = read_request(channel)
        except (EOFError, ConnectionError):
            return 0
        if kind == ord("Q"):
            return 0
        handler = handlers.get(kind)
        try:
            code, body = handler(predictor, payload) if handler else (INTERNAL, b"unknown request kind")
        except Exception as error:  # never let one request take the process down
            code, body = INTERNAL, _describe(error).encode()
        send(channel, code, body)


# --- the zygote ------------------------------------------------------------------------------------------


def _reap(signum=None, frame=None):
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _child(control, spec, channel_fd, log_fd):
    control.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    channel = socket.socket(fileno=channel_fd)
    code = 1
    try:
        code = serve(channel, spec)
    finally:
        os._exit(code)


def recv_fds(sock, bufsize, maxfds):
    """socket.recv_fds (3.9+) for the runtimes' older Pythons (3.7): a message and the fds sent with it."""
    import array

    fds = array.array("i")
    message, ancillary, flags, address = sock.recvmsg(bufsize, socket.CMSG_LEN(maxfds * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return message, list(fds), flags, address


def zygote(control_fd):
    control = socket.socket(fileno=control_fd)
    started = time.monotonic()
    preloaded = []
    for name in PRELOAD:
        try:
            __import__(name)
            preloaded.append(name)
        except Exception:  # a runtime without one of them still serves the others
            pass
    # What the children share stays out of the collector's passes: no pauses for it, and no
    # copy-on-write of pages the collector would otherwise touch.
    gc.freeze()
    signal.signal(signal.SIGCHLD, _reap)
    control.send(
        json.dumps(
            {"ready": True, "pid": os.getpid(), "preloaded": preloaded, "seconds": round(time.monotonic() - started, 3)}
        ).encode()
    )
    while True:
        try:
            message, fds, _, _ = recv_fds(control, BUFFER, 2)
        except (ConnectionError, OSError):
            return 0
        if not message:
            return 0
        spec = json.loads(message)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"error": "spawn needs a socket and a log pipe"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            _child(control, spec, fds[0], fds[1])
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())


def main(argv):
    if len(argv) == 3 and argv[1] == "zygote":
        return zygote(int(argv[2]))
    print("usage: worker.py zygote CONTROL_FD", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
