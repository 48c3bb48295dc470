// Benchplugin is a Velero plugin binary serving package benchplugin's BackupItemAction
// v2, for the module's benchmarks, which build it and run it through Velero's plugin
// manager. Velero's plugin manager starts it; run by hand it prints go-plugin's notice
// that it is a plugin and exits.
package main

import (
	"fmt"
	"os"

	"github.com/itemops/itemops/integrations/velero/internal/benchplugin"
)

func main() {
	if err := benchplugin.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
