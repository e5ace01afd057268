"""The validation suite, run against any set of kubeconfigs."""
