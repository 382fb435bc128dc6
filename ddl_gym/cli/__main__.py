from ddl_gym.cli.main import entry

entry()
