package phase

import (
	"fmt"
	"strings"
)

// Mermaid returns the machine of kind and the options' profile as a Mermaid state
// diagram (stateDiagram-v2), which code hosts render in Markdown. Transitions are listed
// by source phase in Velero's order, then by event in the order of the phases they lead
// to ([Phases]); a phase with no way out gets an arrow to the end state. The text is the
// same on every call. It fails only with [ErrUnknownKind].
func Mermaid(kind Kind, opts ...Option) (string, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: %s (%s profile)\n---\nstateDiagram-v2\n", d.kind, d.profile)
	b.WriteString("    [*] --> New\n")
	d.walk(func(from, to Phase, e Event) {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", from, to, e)
	}, func(final Phase) {
		fmt.Fprintf(&b, "    %s --> [*]\n", final)
	})
	return b.String(), nil
}

// Graphviz returns the machine of kind and the options' profile as a Graphviz digraph in
// the DOT language, ordered as [Mermaid] orders it. Terminal phases are drawn with a double
// border. It fails only with [ErrUnknownKind].
func Graphviz(kind Kind, opts ...Option) (string, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n", fmt.Sprintf("%s (%s profile)", d.kind, d.profile))
	b.WriteString("    rankdir=LR;\n    node [shape=box, style=rounded];\n")
	for _, p := range d.phases() {
		if IsTerminal(p) {
			fmt.Fprintf(&b, "    %q [peripheries=2];\n", p)
		}
	}
	d.walk(func(from, to Phase, e Event) {
		fmt.Fprintf(&b, "    %q -> %q [label=%q];\n", from, to, e)
	}, nil)
	b.WriteString("}\n")
	return b.String(), nil
}

// walk calls edge for every transition of d in diagram order, and final (when not nil)
// after the transitions of each phase that has none.
func (d *definition) walk(edge func(from, to Phase, e Event), final func(Phase)) {
	for i, p := range allPhases {
		if !d.member[i] {
			continue
		}
		out := 0
		for j, e := range allEvents {
			if to := d.next[i][j]; to != "" {
				edge(p, to, e.event)
				out++
			}
		}
		if out == 0 && final != nil {
			final(p)
		}
	}
}
