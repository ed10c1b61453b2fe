// Package nodepredicates answers the questions about a Node that several controllers ask (is it
// Ready; did an update change anything they read, changed.go, so that heartbeats wake none of
// them, with the generic OnUpdate and ConditionsDiffer the pod predicates share), so that they all
// answer them the same way. Pod questions live in the sibling package
// podpredicates.
//
// It only reads Nodes: its functions are pure, never change the Node they are given and never
// talk to the API server.
package nodepredicates

import (
	corev1 "k8s.io/api/core/v1"
)

// NodeReady reports whether the Node's Ready condition is True. A Node without a Ready condition
// is not ready.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
