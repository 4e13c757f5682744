// Evaluates IAM requests with @cloud-copilot/iam-simulate (AWS's policy evaluation logic: explicit deny,
// wildcards, every condition operator, each resource checked against the action's resource types).
// Input (a JSON file named by the first argument):
//   {"principals": {KEY: {"arn": ..., "policies": [{"name": ..., "policy": {...}}]}},
//    "resource_policies": {KEY: {...}},
//    "requests": [{"principal": KEY, "action": ..., "resource": ..., "account": ..., "context": {...},
//                  "resource_policy": KEY | null}]}
// Output (stdout): a JSON array, one {"decision", "errors", "ignored"} per request, in order.
// Used by tests/support/iam/judge.py; never edited by hand to make a call pass.
import { readFileSync } from 'node:fs'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const input = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const results = []
for (const request of input.requests) {
  const principal = input.principals[request.principal]
  const simulation = {
    request: {
      principal: principal.arn,
      action: request.action,
      resource: { resource: request.resource, accountId: request.account },
      contextVariables: request.context,
    },
    identityPolicies: principal.policies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  }
  if (request.resource_policy) {
    simulation.resourcePolicy = input.resource_policies[request.resource_policy]
  }
  const result = await runSimulation(simulation, {})
  if (result.resultType === 'error') {
    results.push({ decision: 'Error', errors: result.errors.message + ' ' + JSON.stringify(result.errors), ignored: [] })
  } else {
    const ignored = result.resultType === 'single' ? result.result.ignoredContextKeys ?? [] : []
    results.push({ decision: result.overallResult, errors: null, ignored })
  }
}
process.stdout.write(JSON.stringify(results))
