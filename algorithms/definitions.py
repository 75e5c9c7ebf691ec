"""The built-in algorithms, their images and their arguments, as plain data.

``parse_args`` is the one reading of an algorithm's arguments: the console runs it when a job is
submitted (so a bad argument is refused before anything starts) and the trainer runs it again
when it starts. Arguments follow the original's names; a later value of the same argument wins,
which is how hyperparameter tuning's ``--name=value`` overrides what ``args`` set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

IMAGE_PREFIX = "gcr.io/cloud-ml-algos/"
CLASSIFICATION, REGRESSION = "classification", "regression"
CLASSIFICATION_METRICS = ("accuracy", "auc", "log_loss")
REGRESSION_METRICS = ("rmse", "mae", "r2")
# What a metric is best at: tuning goals are checked against it.
MAXIMIZED_METRICS = ("accuracy", "auc", "r2")


@dataclass(frozen=True)
class Argument:
    """One ``--name=value`` argument of an algorithm."""

    name: str
    kind: str  # path, float, int, bool, choice, str
    help: str
    default: object = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[str, ...] = ()
    required: bool = False
    aliases: tuple[str, ...] = ()
    tunable: bool = False

    def rule(self) -> str:
        """The rule in words, for error messages and the README."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false (or the flag alone for true)"
        if self.kind in ("path", "str"):
            return "a gs:// URI or a path in this server's storage" if self.kind == "path" else "text"
        noun = "a whole number" if self.kind == "int" else "a number"
        low = (
            None
            if self.minimum is None
            else f"{'above' if self.exclusive_minimum else 'at least'} {_num(self.minimum)}"
        )
        high = None if self.maximum is None else f"at most {_num(self.maximum)}"
        bounds = " and ".join(part for part in (low, high) if part)
        return f"{noun} {bounds}".strip()


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class Algorithm:
    """A built-in algorithm: the image that selects it and the module that runs it."""

    name: str
    title: str
    images: tuple[str, ...]
    module: str
    framework: str  # XGBOOST or SCIKIT_LEARN, as builtInAlgorithmOutput.framework
    model_file: str
    arguments: tuple[Argument, ...] = field(default=())
    max_gpus: int = 0

    @property
    def image(self) -> str:
        return self.images[0]

    def argument(self, name: str) -> Argument | None:
        for argument in self.arguments:
            if name == argument.name or name in argument.aliases:
                return argument
        return None


def _path(name, help, required=False):
    return Argument(name, "path", help, required=required)


COMMON = (
    _path(
        "training_data_path",
        "CSV of training data: UTF-8, no header row, the target in the first column.",
        required=True,
    ),
    _path("validation_data_path", "CSV of validation data in the same format; replaces validation_split."),
    _path("test_data_path", "CSV of test data in the same format; replaces test_split."),
    Argument(
        "preprocess",
        "bool",
        "Analyse and transform the data first: fill missing values, drop rows with more "
        "than 10% missing, encode categorical columns, scale numeric ones.",
        default=False,
    ),
    Argument(
        "validation_split",
        "float",
        "Fraction of the training data held out for validation.",
        default=0.2,
        minimum=0,
        maximum=0.4,
    ),
    Argument(
        "test_split",
        "float",
        "Fraction of the training data held out for testing.",
        default=0.2,
        minimum=0,
        maximum=0.4,
    ),
    Argument("model_type", "choice", "What the target is: classes or numbers.", choices=(CLASSIFICATION, REGRESSION)),
    Argument(
        "header", "bool", "Our extension: the first row of every CSV is a header with column names.", default=False
    ),
    Argument("seed", "int", "Seed of the random split and of training.", default=42, minimum=0, maximum=2**31 - 1),
    Argument(
        "max_categories",
        "int",
        "Categorical columns with more distinct values than this are hashed into "
        "that many buckets instead of one-hot encoded.",
        default=20,
        minimum=2,
        maximum=10000,
    ),
)

XGBOOST_OBJECTIVES = (
    "binary:logistic",
    "multi:softmax",
    "multi:softprob",
    "reg:squarederror",
    "reg:linear",
    "reg:absoluteerror",
    "reg:logistic",
)

BOOSTED_TREES = Algorithm(
    name="boosted_trees",
    title="XGBoost (boosted trees)",
    images=(IMAGE_PREFIX + "boosted_trees:latest", IMAGE_PREFIX + "boosted_trees"),
    module="algorithms.boosted_trees",
    framework="XGBOOST",
    model_file="model.bst",
    arguments=COMMON
    + (
        Argument(
            "objective",
            "choice",
            "The learning objective; reg:linear is the old name of reg:squarederror. "
            "Default: binary:logistic or multi:softprob for classification, reg:squarederror for regression.",
            choices=XGBOOST_OBJECTIVES,
        ),
        Argument(
            "eta",
            "float",
            "Learning rate: step size shrinkage.",
            default=0.3,
            minimum=0,
            maximum=1,
            exclusive_minimum=True,
            tunable=True,
            aliases=("learning_rate",),
        ),
        Argument("max_depth", "int", "Maximum depth of a tree.", default=6, minimum=1, maximum=30, tunable=True),
        Argument(
            "num_boost_round",
            "int",
            "Number of boosting rounds (trees).",
            default=20,
            minimum=1,
            maximum=10000,
            tunable=True,
            aliases=("num_round",),
        ),
        Argument(
            "subsample",
            "float",
            "Fraction of rows sampled for each tree.",
            default=1.0,
            minimum=0,
            maximum=1,
            exclusive_minimum=True,
            tunable=True,
        ),
        Argument(
            "colsample_bytree",
            "float",
            "Fraction of columns sampled for each tree.",
            default=1.0,
            minimum=0,
            maximum=1,
            exclusive_minimum=True,
            tunable=True,
        ),
        Argument(
            "min_child_weight",
            "float",
            "Minimum sum of instance weight in a child.",
            default=1.0,
            minimum=0,
            tunable=True,
        ),
        Argument(
            "gamma", "float", "Minimum loss reduction to split a leaf further.", default=0.0, minimum=0, tunable=True
        ),
        Argument(
            "lambda",
            "float",
            "L2 regularisation of the leaf weights.",
            default=1.0,
            minimum=0,
            tunable=True,
            aliases=("reg_lambda",),
        ),
        Argument(
            "alpha",
            "float",
            "L1 regularisation of the leaf weights.",
            default=0.0,
            minimum=0,
            tunable=True,
            aliases=("reg_alpha",),
        ),
        Argument(
            "eval_metric",
            "choice",
            "The metric XGBoost logs for each round on the validation data.",
            choices=("error", "logloss", "auc", "merror", "mlogloss", "rmse", "mae"),
        ),
    ),
)

LINEAR_LEARNER = Algorithm(
    name="linear_learner",
    title="Linear learner (scikit-learn)",
    images=(
        IMAGE_PREFIX + "linear_learner_cpu:latest",
        IMAGE_PREFIX + "linear_learner_cpu",
        IMAGE_PREFIX + "linear_learner_gpu:latest",
        IMAGE_PREFIX + "linear_learner_gpu",
    ),
    module="algorithms.linear_learner",
    framework="SCIKIT_LEARN",
    model_file="model.joblib",
    max_gpus=1,
    arguments=COMMON
    + (
        Argument(
            "learning_rate",
            "float",
            "Initial learning rate of stochastic gradient descent.",
            default=0.01,
            minimum=0,
            maximum=10,
            exclusive_minimum=True,
            tunable=True,
        ),
        Argument(
            "max_steps",
            "int",
            "Number of mini-batch steps to train for.",
            default=1000,
            minimum=1,
            maximum=10_000_000,
            tunable=True,
        ),
        Argument(
            "batch_size", "int", "Rows per mini-batch step.", default=100, minimum=1, maximum=1_000_000, tunable=True
        ),
        Argument(
            "optimizer_type",
            "choice",
            "How the learning rate changes: gradient_descent keeps it constant, "
            "adaptive divides it by 5 whenever the loss stops falling.",
            default="adaptive",
            choices=("gradient_descent", "adaptive"),
        ),
        Argument(
            "l1_regularization_strength", "float", "L1 regularisation strength.", default=0.0, minimum=0, tunable=True
        ),
        Argument(
            "l2_regularization_strength",
            "float",
            "L2 regularisation strength.",
            default=0.0001,
            minimum=0,
            tunable=True,
        ),
        Argument(
            "eval_steps",
            "int",
            "Accepted for compatibility with the original; evaluation always uses the whole validation split.",
            minimum=1,
        ),
    ),
)

ALGORITHMS = (BOOSTED_TREES, LINEAR_LEARNER)
_BY_IMAGE = {image: algorithm for algorithm in ALGORITHMS for image in algorithm.images}
_BY_NAME = {algorithm.name: algorithm for algorithm in ALGORITHMS}


def by_image(image: str | None) -> Algorithm | None:
    return _BY_IMAGE.get(image or "")


def by_name(name: str) -> Algorithm | None:
    return _BY_NAME.get(name)


def for_training_input(training_input: dict | None) -> Algorithm | None:
    """The built-in algorithm a TrainingInput selects through masterConfig.imageUri, if any."""
    return by_image(((training_input or {}).get("masterConfig") or {}).get("imageUri"))


def is_builtin_image(image: str | None) -> bool:
    return bool(image) and str(image).startswith(IMAGE_PREFIX)


# --- parsing -----------------------------------------------------------------------------------


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def convert(argument: Argument, raw: str | None) -> tuple[object, str | None]:
    """(value, problem) for one argument's text (also a tuning parameter's bounds, checked at submit)."""
    flag = f"--{argument.name}"
    if argument.kind == "bool":
        if raw is None or raw.lower() in _TRUE:
            return True, None
        if raw.lower() in _FALSE:
            return False, None
        return None, f"{flag} must be {argument.rule()}; got {raw!r}."
    if raw is None or raw == "":
        return None, f"{flag} needs a value: {argument.rule()}."
    if argument.kind in ("path", "str"):
        return raw, None
    if argument.kind == "choice":
        if raw not in argument.choices:
            return None, f"{flag} must be {argument.rule()}; got {raw!r}."
        return raw, None
    try:
        number = float(raw)
    except ValueError:
        return None, f"{flag} must be {argument.rule()}; got {raw!r}."
    if not math.isfinite(number):
        return None, f"{flag} must be {argument.rule()}; got {raw!r}."
    if argument.kind == "int":
        if not number.is_integer():
            return None, f"{flag} must be {argument.rule()}; got {raw!r}."
        number = int(number)
    low, high = argument.minimum, argument.maximum
    too_low = low is not None and (number <= low if argument.exclusive_minimum else number < low)
    if too_low or (high is not None and number > high):
        return None, f"{flag} must be {argument.rule()}; got {raw}."
    return number, None


def split_argv(argv: list[str]) -> list[tuple[str, str | None, str]]:
    """``--name=value``, ``--name value`` and bare ``--flag`` items as (name, value, as written)."""
    items, index = [], 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if not token.startswith("--") or token == "--":
            items.append(("", None, token))
            continue
        name, sep, value = token[2:].partition("=")
        name = name.replace("-", "_")
        if not sep:
            following = argv[index] if index < len(argv) else None
            if following is not None and not following.startswith("--"):
                value, sep = following, "="
                index += 1
        items.append((name, value if sep else None, token))
    return items


def parse_args(algorithm: Algorithm, argv: list[str], *, allow_job_dir: bool = True) -> tuple[dict, list[str]]:
    """The algorithm's arguments with defaults filled in, and every problem found (as sentences)."""
    values: dict = {}
    problems: list[str] = []
    for name, raw, written in split_argv(argv):
        if not name:
            problems.append(f"{written!r} is not an argument: write --name=value.")
            continue
        if name == "job_dir" and allow_job_dir:
            values["job_dir"] = raw
            continue
        argument = algorithm.argument(name)
        if argument is None:
            known = ", ".join(f"--{a.name}" for a in algorithm.arguments)
            problems.append(f"--{name} is not an argument of the built-in {algorithm.title}. Its arguments: {known}.")
            continue
        value, problem = convert(argument, raw)
        if problem:
            problems.append(problem)
        else:
            values[argument.name] = value
    for argument in algorithm.arguments:
        if argument.name not in values:
            if argument.required:
                problems.append(f"--{argument.name} is required: {argument.help}")
            values[argument.name] = argument.default
    problems += _combined_rules(algorithm, values)
    return values, problems


def model_type_of(algorithm: Algorithm, values: dict) -> str | None:
    """classification or regression, from --model_type or the XGBoost objective."""
    if values.get("model_type"):
        return values["model_type"]
    objective = values.get("objective")
    if objective:
        return REGRESSION if objective.startswith("reg:") else CLASSIFICATION
    return None


def _combined_rules(algorithm: Algorithm, values: dict) -> list[str]:
    problems = []
    split = (values.get("validation_split") or 0) + (values.get("test_split") or 0)
    if split > 0.4 + 1e-9:
        problems.append(f"--validation_split plus --test_split must be at most 0.4; got {round(split, 6)}.")
    model_type, objective = values.get("model_type"), values.get("objective")
    if algorithm is LINEAR_LEARNER and not model_type:
        problems.append("--model_type is required for the linear learner: classification or regression.")
    if algorithm is BOOSTED_TREES:
        if not model_type and not objective:
            problems.append("--model_type (classification or regression) or --objective is required.")
        elif model_type and objective and model_type_of(algorithm, {"objective": objective}) != model_type:
            problems.append(
                f"--objective {objective} does not fit --model_type {model_type}: use a "
                f"{'reg:' if model_type == REGRESSION else 'binary: or multi:'} objective."
            )
    return problems


def metrics_for(model_type: str | None) -> tuple[str, ...]:
    if model_type == CLASSIFICATION:
        return CLASSIFICATION_METRICS
    if model_type == REGRESSION:
        return REGRESSION_METRICS
    return CLASSIFICATION_METRICS + REGRESSION_METRICS


def primary_metric(model_type: str) -> str:
    """What a tuning job optimises when its hyperparameterMetricTag is not one of our metrics."""
    return "accuracy" if model_type == CLASSIFICATION else "rmse"
