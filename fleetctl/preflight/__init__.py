"""`fusionfleet aws preflight`: what a first deploy on an account needs, checked (and fixed where safe) first."""
