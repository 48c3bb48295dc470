package phase

// Events returns every event in the order of the phases they lead to, for the tests
// that try each.
func Events() []Event {
	out := make([]Event, len(allEvents))
	for i, e := range allEvents {
		out[i] = e.event
	}
	return out
}
