// Package browsertest holds the tests of package webview that run its pages in a real
// browser: headless Chromium, driven with chromedp, against a live store with a Monitor
// running. It is a module of its own so that chromedp stays out of the root module's
// graph; it exports nothing.
//
// The tests find Chromium at $CHROMIUM, else as chromium or chromium-browser on the
// PATH. Where there is none they skip, unless CI=true, where they fail: CI installs
// Debian's chromium package (.ci/run).
package browsertest
