"""The lab spec, the state directory and the supervisor that starts and stops a lab."""
