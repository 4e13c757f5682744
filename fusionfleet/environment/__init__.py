"""Each deployed component's environment contract (`contract.py`): one per component, read by its
entry point, written by the local stack, held to template.yaml by a static test."""
