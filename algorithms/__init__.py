"""Built-in algorithms: trainer packages this console ships, run like any user's package.

A job selects one by ``trainingInput.masterConfig.imageUri`` (the original's container image,
e.g. ``gcr.io/cloud-ml-algos/boosted_trees:latest``) and passes its arguments in ``args``. The
executor installs this package into the job's environment and runs the algorithm's module, so
logs, cancel and hyperparameter tuning work as for any trainer.

The modules split by what they need: ``catalogue`` (algorithms and their arguments),
``table`` (reading CSV) and ``analysis`` (column statistics, warnings) use only the standard
library, so the console imports them too; ``preprocess``, ``train`` and the algorithm modules
need numpy, scikit-learn and XGBoost, which every runtime environment has.
"""

__version__ = "1.0.0"
