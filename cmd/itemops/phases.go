package main

import (
	"fmt"
	"io"

	"github.com/itemops/itemops/phase"
)

// runPhases prints the phase machines.
func runPhases(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("phases", stderr)
	kindFlag := fs.String("kind", "", "`kind` to print: backup or restore (default both)")
	format := fs.String("format", "mermaid", "output `format`: mermaid or dot")
	queue := fs.Bool("queue", false, "backups go through Queued and ReadyToStart")
	restoreFinalizing := fs.Bool("restore-finalizing", false, "restores go through Finalizing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	kinds := []phase.Kind{phase.Backup, phase.Restore}
	if *kindFlag != "" {
		k, err := phase.ParseKind(*kindFlag)
		if err != nil {
			return usageError{fmt.Sprintf("-kind: %v", err)}
		}
		kinds = []phase.Kind{k}
	}
	var render func(phase.Kind, ...phase.Option) (string, error)
	switch *format {
	case "mermaid":
		render = phase.Mermaid
	case "dot":
		render = phase.Graphviz
	default:
		return usageError{fmt.Sprintf("-format: unknown format %q (want mermaid or dot)", *format)}
	}
	var opts []phase.Option
	if *queue {
		opts = append(opts, phase.WithQueue())
	}
	if *restoreFinalizing {
		opts = append(opts, phase.WithRestoreFinalizing())
	}
	for i, k := range kinds {
		text, err := render(k, opts...)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if _, err := io.WriteString(stdout, text); err != nil {
			return err
		}
	}
	return nil
}
