"""Models, versions and operations: built by the model-registry issue."""
