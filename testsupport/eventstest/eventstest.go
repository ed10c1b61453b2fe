// Package eventstest reads the Events a component recorded into a client-go events.FakeRecorder in
// tests. It is test support; non-test code must not import it.
package eventstest

import "k8s.io/client-go/tools/events"

// Drain returns the Events recorded so far ("Type Reason note" each), in the order they were
// recorded, and empties the recorder. It never blocks.
func Drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
