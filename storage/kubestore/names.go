package kubestore

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

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
