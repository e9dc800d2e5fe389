#!/usr/bin/env python3
"""CDK app: ``cdk synth -c env=<name>`` (or ``PROJECT_ENV``) selects the project.yaml environment."""

from stacks.platform_app import main

if __name__ == "__main__":
    main()
