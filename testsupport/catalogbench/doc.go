// Package catalogbench is what benchmarks on the embedded EC2 catalog share: the instance types the
// local provider offers a NodePool, and lower bounds on the price of nodes that can hold a set of
// pods (the covering LP, and the exact integer optimum for identical pods).
//
// It is test support: only tests and benchmarks import it. It reads the embedded catalog and holds
// no state between calls.
package catalogbench
