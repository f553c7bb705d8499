"""The generic LoadGen machinery: the harness process, the SUTs, user.conf, the logs LoadGen writes, TEST06."""
