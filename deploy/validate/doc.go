// Package validate checks deploy/ offline, with no container engine or
// cluster: every Kubernetes manifest decodes strictly into the API types and
// the kustomizations render to objects with the probes, policies and secret
// references bidgate needs; the compose file loads with its .env.example;
// the alert rules and the Grafana dashboard name only metrics that bidgate's
// code registers; every BIDGATE_* setting is a flag of `bidgate serve`;
// promtool and shellcheck pass.
//
// Run: make test-deploy (it builds bidgate for the flag check). A test
// whose tool or binary is missing skips, and fails when CI is set.
package validate
