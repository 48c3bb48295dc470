package kubestore

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// The limits of object names: a name is a DNS-1123 subdomain of at most maxNameBytes
// bytes; past that, a run's object takes the long form, whose readable part is cut to
// longPrefixBytes.
const (
	maxNameBytes    = 253
	longPrefixBytes = 200
)

// formatName is the name of the ItemopsChunk that holds the global partition's keys.
// No run's object can have it, since every run's name holds a dot.
const formatName = "itemops"

// hashEncoding writes the hash of a long name in lowercase base32hex without padding,
// whose letters and digits a DNS-1123 name takes.
var hashEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// objectName returns the name of the ItemopsRun that holds the run of p, a DNS-1123
// subdomain that no other partition of a valid owner maps to. The short form is a tag
// for the kind ("b" for Backup, "r" for Restore, "k" and the escaped kind for a kind of
// one's own), a dot, and the escaped name (see escape). A short form longer than
// maxNameBytes gives the long form: "h.", the short form's first longPrefixBytes bytes
// cut at the start of an escape, a dot, and 32 characters of the SHA-256 of the kind, a
// 0 byte and the name. No short form starts with "h.", and the stored object names its
// owner in full, so that two owners whose long forms collided would be told apart.
func objectName(p kv.Partition) string {
	var b strings.Builder
	switch p.Kind {
	case phase.Backup:
		b.WriteString("b")
	case phase.Restore:
		b.WriteString("r")
	default:
		b.WriteString("k")
		escape(&b, string(p.Kind))
	}
	b.WriteByte('.')
	escape(&b, p.Name)
	short := b.String()
	if len(short) <= maxNameBytes {
		return short
	}
	cut := longPrefixBytes
	// An escape is 'z' and two hex digits, so a cut within one moves back to its 'z';
	// a 'z' is never a hex digit, so the two bytes before the cut tell.
	for i := max(cut-2, 0); i < cut; i++ {
		if short[i] == 'z' {
			cut = i
			break
		}
	}
	sum := sha256.Sum256([]byte(string(p.Kind) + "\x00" + p.Name))
	return "h." + strings.TrimSuffix(short[:cut], ".") + "." + hashEncoding.EncodeToString(sum[:])[:32]
}

// escape writes s to b as lowercase letters and digits: it keeps the bytes a to y and 0
// to 9, and writes every other byte as 'z' and its two lowercase hex digits. No escape
// is a prefix of another, so distinct strings give distinct results.
func escape(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'y' || '0' <= c && c <= '9' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('z')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
}

// ownerLabels returns the labels that name the owner of the run called name, so that
// kubectl get itemopsruns -l finds a run by its owner: for a name of the form
// namespace/name (the form of integrations/controllerruntime's OwnerOf),
// itemops.io/namespace and itemops.io/name; for another name, itemops.io/name. A label
// whose value would not be a valid label value (more than 63 bytes, or characters other
// than letters, digits, '-', '_' and '.') is left out, and a namespace/name whose name
// part cannot be a label gets neither. The store never selects by them.
func ownerLabels(name string) map[string]string {
	if ns, n, ok := strings.Cut(name, "/"); ok && !strings.Contains(n, "/") {
		if validLabel(ns) && validLabel(n) {
			return map[string]string{labelNS: ns, labelName: n}
		}
		return nil
	}
	if validLabel(name) {
		return map[string]string{labelName: name}
	}
	return nil
}

func validLabel(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 && v != "" }

// setOwnerLabels sets in lbls, the labels of the object of the run called name, its
// owner labels (see ownerLabels), and removes those the name does not give.
func setOwnerLabels(lbls map[string]string, name string) {
	want := ownerLabels(name)
	for _, k := range []string{labelNS, labelName} {
		if v, ok := want[k]; ok {
			lbls[k] = v
		} else {
			delete(lbls, k)
		}
	}
}

// checkOwnerLabels returns an error when a label of obj, the object of the run called
// name, that names the run's owner says otherwise than the name (see ownerLabels). The
// labels derive from spec.owner, which the API server keeps immutable, and the sum does
// not cover them, so that objects written before them still read: a label that is
// absent is no error (the object's next write adds it), but one changed by hand would
// make kubectl get -l find the wrong run, and is damage.
func checkOwnerLabels(obj *unstructured.Unstructured, name string) error {
	want, got := ownerLabels(name), obj.GetLabels()
	for _, k := range []string{labelNS, labelName} {
		if v, ok := got[k]; ok && v != want[k] {
			return fmt.Errorf("label %s is %q, which does not name the run's owner %q", k, v, name)
		}
	}
	return nil
}
