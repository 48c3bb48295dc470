package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// storeUsage says how a command names a store; the usage of every command that opens
// one prints it.
const storeUsage = `A STORE is one of:
  PATH or bolt:///ABS/PATH         a boltstore file (inspect also reads itemoperations.json.gz files)
  etcd://HOST:PORT[,HOST:PORT...]/PREFIX
                                   an etcdstore under PREFIX (empty: the root of the key space);
                                   TLS from -cacert, -cert and -key, or from ITEMOPS_ETCD_CACERT,
                                   ITEMOPS_ETCD_CERT and ITEMOPS_ETCD_KEY
  kube://CONTEXT/NAMESPACE         a kubestore in NAMESPACE, through the kubeconfig context CONTEXT
  kube:///NAMESPACE                the same, through the kubeconfig's current context;
                                   the kubeconfig is found as kubectl finds it (-kubeconfig,
                                   else KUBECONFIG, else ~/.kube/config)
`

// A storeKind tells the stores a command can open apart.
type storeKind int

const (
	boltStore storeKind = iota
	etcdStore
	kubeStore
)

// A storeName is a store as a command line names it; parseStoreName makes one.
type storeName struct {
	kind storeKind
	// path is a boltstore file's path, as given (a plain path) or the path of a bolt://
	// URL; url says whether it came from one.
	path string
	url  bool
	// endpoints and prefix name an etcdstore: the members' host:port, in the order given,
	// and the key prefix, without the slash that separates it from the endpoints.
	endpoints []string
	prefix    string
	// context and namespace name a kubestore; an empty context is the kubeconfig's
	// current one.
	context, namespace string
}

// String returns the name as it was given, in its canonical form, for messages.
func (n storeName) String() string {
	switch n.kind {
	case etcdStore:
		return "etcd://" + strings.Join(n.endpoints, ",") + "/" + n.prefix
	case kubeStore:
		return "kube://" + n.context + "/" + n.namespace
	}
	if n.url {
		return "bolt://" + n.path
	}
	return n.path
}

// errStoreName is what every error of parseStoreName wraps.
var errStoreName = errors.New("bad store name")

// parseStoreName parses how a command line names a store (see storeUsage): a text
// without "://" is a path, taken as it is; bolt:///ABS/PATH is an absolute path, taken
// as it is after the scheme (no %-decoding); etcd://HOSTS/PREFIX names the members as
// host:port, with a port from 1 to 65535, separated by commas, and a prefix that may be
// empty, taken as it is; kube://CONTEXT/NAMESPACE takes the namespace after the last
// slash, a DNS-1123 label, and the context before it, which may hold slashes (as the
// contexts of some clouds do) and may be empty for the current one. It fails with an
// error wrapping errStoreName that says what is wrong: an empty name, an unknown
// scheme, a bolt path that is not absolute, no endpoint, a bad host:port, a bad
// namespace, or a control character anywhere in a URL.
func parseStoreName(s string) (storeName, error) {
	bad := func(format string, args ...any) (storeName, error) {
		return storeName{}, fmt.Errorf("%w %q: %s", errStoreName, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return bad("empty")
	}
	scheme, rest, isURL := strings.Cut(s, "://")
	if !isURL {
		return storeName{kind: boltStore, path: s}, nil
	}
	if strings.ContainsFunc(rest, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad("a control character in the name")
	}
	switch scheme {
	case "bolt":
		if !strings.HasPrefix(rest, "/") {
			return bad("want bolt:///ABSOLUTE/PATH (an empty host, then the file's absolute path)")
		}
		if rest == "/" {
			return bad("no file after bolt://")
		}
		return storeName{kind: boltStore, path: rest, url: true}, nil
	case "etcd":
		hosts, prefix, ok := strings.Cut(rest, "/")
		if !ok {
			return bad("want etcd://HOST:PORT[,HOST:PORT...]/PREFIX (the slash before the prefix is needed, even for an empty one)")
		}
		if hosts == "" {
			return bad("no endpoint: want etcd://HOST:PORT[,HOST:PORT...]/PREFIX")
		}
		var endpoints []string
		for _, hp := range strings.Split(hosts, ",") {
			host, port, err := net.SplitHostPort(hp)
			if err != nil {
				return bad("endpoint %q: want HOST:PORT", hp)
			}
			if host == "" {
				return bad("endpoint %q: no host", hp)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
				return bad("endpoint %q: the port must be a number from 1 to 65535", hp)
			}
			endpoints = append(endpoints, hp)
		}
		return storeName{kind: etcdStore, endpoints: endpoints, prefix: prefix}, nil
	case "kube":
		at := strings.LastIndexByte(rest, '/')
		if at < 0 {
			return bad("want kube://CONTEXT/NAMESPACE or kube:///NAMESPACE")
		}
		context, ns := rest[:at], rest[at+1:]
		if ns == "" {
			return bad("no namespace: want kube://CONTEXT/NAMESPACE or kube:///NAMESPACE")
		}
		if !dnsLabel(ns) {
			return bad("namespace %q: want a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)", ns)
		}
		return storeName{kind: kubeStore, context: context, namespace: ns}, nil
	}
	return bad("unknown scheme %q: want a path, bolt:///PATH, etcd://HOST:PORT/PREFIX or kube://CONTEXT/NAMESPACE", scheme)
}

// dnsLabel reports whether s is a DNS-1123 label, as a Kubernetes namespace must be.
func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
