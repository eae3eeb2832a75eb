"""govd's configuration: the YAML file's schema (`schema`) and how it is read (`load`).

(Not ``govd.config``: the top-level ``config/`` folder holds the YAML itself.)
"""

from govd.conf.load import ConfigError, check_permissions, load_config, parse_config
from govd.conf.schema import Config

__all__ = ["Config", "ConfigError", "check_permissions", "load_config", "parse_config"]
