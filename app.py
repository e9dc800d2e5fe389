#!/usr/bin/env python3
"""CDK app: ``cdk synth -c env=<name>`` (or ``PROJECT_ENV``) selects the project.yaml environment."""

from platform_config.cdk_context import check_cli_config

if __name__ == "__main__":
    check_cli_config()  # a bad project.yaml ends here, before aws-cdk-lib's jsii kernel starts (about 3 s)
    from stacks.platform_app import main

    main()
