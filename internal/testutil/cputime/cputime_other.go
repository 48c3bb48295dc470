//go:build !unix

package cputime

import "time"

func used() time.Duration { return -1 }
