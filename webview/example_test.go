package webview_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/webview"
)

// The view mounted under /ops/ of a mux of one's own, read-only.
func ExampleNew() {
	h, err := webview.New(memstore.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops/", h))

	res := httptest.NewRecorder()
	mux.ServeHTTP(res, httptest.NewRequest(http.MethodGet, "/ops/?format=json", nil))
	fmt.Println(res.Code, res.Header().Get("Content-Type"))
	fmt.Print(res.Body)
	// Output:
	// 200 application/json; charset=utf-8
	// {
	//  "runs": [],
	//  "total": 0,
	//  "page": 1,
	//  "pages": 1,
	//  "pageSize": 50
	// }
}

// A view that may cancel runs: the hook decides who may.
func ExampleWithAuthorize() {
	h, err := webview.New(memstore.New(), webview.WithAuthorize(func(r *http.Request, a webview.Action) error {
		if r.Header.Get("X-Forwarded-User") != "oncall" { // set by the proxy in front
			return fmt.Errorf("%s of %s: only on-call may", a.Verb, a.Run)
		}
		return nil
	}))
	fmt.Println(h != nil, err)
	// Output: true <nil>
}
