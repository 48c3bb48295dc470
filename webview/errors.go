package webview

import "errors"

// ErrInvalidOption is returned by [New] when an option is out of its range: a nil hook or
// clock, a page size below 1 or above 500, a refresh interval below a second.
var ErrInvalidOption = errors.New("invalid webview option")
