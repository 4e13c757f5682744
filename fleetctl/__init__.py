"""fleetctl: the client, the `fusionfleet` CLI, the local stack and sample media: tooling for people and tests.

The layer above the domain (`fusionfleet`): it may import the domain, never the reverse, and it starts
the slicer runner and the workers as processes rather than importing them. The slicer's Lambda
package does not ship it.
"""
