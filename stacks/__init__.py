"""AWS CDK infrastructure: one construct per module, composed by four thin stacks.

Every value comes from :class:`platform_config.ProjectConfig`; see ``docs/infrastructure.md``.
"""
