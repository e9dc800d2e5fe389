"""cdk8s charts: the training Job per recovery mode, its headless Service, the config map and dataset preparation."""
