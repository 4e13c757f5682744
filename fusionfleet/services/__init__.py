"""Services, each run by one handler: the slicer's logic, the watchdog, dead letters, backups, operations."""
