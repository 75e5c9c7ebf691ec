"""Hyperparameter tuning: the search (Optuna, the GP sampler), early stopping, a study's trial table."""
