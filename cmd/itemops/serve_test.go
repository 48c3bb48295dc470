package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// startServe runs serve with args on a store, on 127.0.0.1:0, and returns the base URL
// it prints; the server stops at the test's end, and serve must then return nil.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut strings.Builder
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, &errOut)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, "serve printed no address: %s", errOut.String())
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute): // a guard against a hang, not a timing
			t.Error("serve did not return after its context ended")
		}
	})
	return m[1]
}

// serveStore writes a store with a waiting restore and a completed backup.
func serveStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	waiting := operations.Run{Owner: operations.Owner{Kind: phase.Restore, Name: "r1"}, Phase: phase.New, Created: t0}
	require.NoError(t, waiting.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
	done := operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "b1\u202e"}, Phase: phase.New, Created: t0}
	require.NoError(t, done.SetPhase(phase.Completed, "finished", t0))
	require.NoError(t, s.CreateRun(context.Background(), waiting))
	require.NoError(t, s.CreateRun(context.Background(), done))
	require.NoError(t, s.Close())
	return path
}

func fetch(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	path := serveStore(t)
	base := startServe(t, path)
	status, page := fetch(t, base)
	require.Equal(t, 200, status)
	require.Contains(t, page, "2 runs")
	require.Contains(t, page, `b1\u202e`)
	status, page = fetch(t, base+"run?kind=Restore&name=r1")
	require.Equal(t, 200, status)
	require.Contains(t, page, "WaitingForPluginOperations")
	require.NotContains(t, page, `action="cancel"`, "read-only by default")
	status, page = fetch(t, base+"?format=json&phase=Completed")
	require.Equal(t, 200, status)
	require.Contains(t, page, `"total": 1`)
	res, err := http.PostForm(base+"cancel", url.Values{})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// A second serve of the same file reads it too: both hold it read-only.
	status, _ = fetch(t, startServe(t, path))
	require.Equal(t, 200, status)
}

func TestServeAllowCancel(t *testing.T) {
	path := serveStore(t)
	base := startServe(t, "-allow-cancel", path)
	_, page := fetch(t, base+"run?kind=Restore&name=r1")
	fields := map[string]string{}
	for _, m := range regexp.MustCompile(`name="(run|token)" value="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		fields[m[1]] = strings.ReplaceAll(m[2], "&amp;", "&")
	}
	require.Len(t, fields, 2, "the page of a waiting run has a cancel form")
	form := url.Values{"run": {fields["run"]}, "token": {fields["token"]}, "reason": {"from the view"}}

	// A request that names another host (a rebound DNS name) is refused by the hook.
	req, err := http.NewRequest(http.MethodPost, base+"cancel", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Host = "attacker.example:80"
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = client.PostForm(base+"cancel", form)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = fetch(t, base+"run?kind=Restore&name=r1&format=json")
	require.Contains(t, page, `"cancelReason": "from the view"`)
}

func TestServeUsage(t *testing.T) {
	path := serveStore(t)
	status, _, errOut := runCLI("serve", "-allow-cancel", "-addr", "0.0.0.0:0", path)
	require.Equal(t, 2, status)
	require.Contains(t, errOut, "-allow-cancel needs a loopback -addr")
	status, _, errOut = runCLI("serve", "-addr", "nocolon", path)
	require.Equal(t, 2, status, errOut)
	status, _, _ = runCLI("serve")
	require.Equal(t, 2, status)
}
