package restoreorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ClusterScope is the namespace under which a [Source] lists cluster-scoped items.
// Kubernetes namespaces are never empty, so it cannot clash with a real one.
const ClusterScope = ""

// An Entry is one item file of a backup.
type Entry struct {
	Name string // the item's name: its file name without ".json"
	Path string // where [Source.Open] finds the item's JSON
}

// A Source is what a backup holds: group-resources, the namespaces that hold items of
// each (with [ClusterScope] for cluster-scoped items), and the items of each. [FromFS]
// and [FromTarGz] read Velero backups; other implementations may serve a backup from
// elsewhere (a database, a test fixture).
//
// The lists a Source returns are sorted, without repeats, and neither the Source nor
// its caller changes them afterwards; [Collect] checks the order and fails with
// [ErrSourceContract] otherwise. A Source must be safe for concurrent use. Each method
// returns ctx.Err() if ctx is done before it finishes.
type Source interface {
	// Resources returns the backup's group-resources ("pods", "deployments.apps"),
	// sorted by byte order.
	Resources(ctx context.Context) ([]string, error)
	// Namespaces returns the namespaces that hold items of resource, sorted by byte
	// order, so ClusterScope ("") comes first when there are cluster-scoped items. A
	// resource the backup does not hold has none.
	Namespaces(ctx context.Context, resource string) ([]string, error)
	// Items returns the items of resource in namespace (ClusterScope for
	// cluster-scoped ones), sorted by Name in byte order.
	Items(ctx context.Context, resource, namespace string) ([]Entry, error)
	// Open opens the item at path, an [Entry.Path] the Source returned, for reading its
	// JSON. The caller closes it. A path the Source does not know fails with an error
	// wrapping [io/fs.ErrNotExist].
	Open(ctx context.Context, path string) (io.ReadCloser, error)
}

// A LabelSource is a [Source] that can give an item's labels more cheaply than by
// reading the item. [Collect] uses it, when a source has it, to apply label selectors.
type LabelSource interface {
	Source
	// Labels returns the metadata.labels of the item at path; an item without labels
	// has none. It fails with an error wrapping [ErrInvalidItem] if the item is not a
	// JSON object.
	Labels(ctx context.Context, path string) (map[string]string, error)
}

// ReadItem reads the JSON of the item at path from src, for pass two. It fails with an
// error wrapping [ErrInvalidItem] if the item is not a JSON object, with the source's
// error if it cannot be opened or read, and with ctx.Err() if ctx is done first.
func ReadItem(ctx context.Context, src Source, path string) ([]byte, error) {
	if b, ok := src.(itemBytes); ok {
		data, err := b.itemBytes(ctx, path)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(data), nil // the archive's bytes are shared: never hand them out
	}
	var buf bytes.Buffer
	if err := readInto(ctx, src, path, &buf); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if err := checkObject(path, data); err != nil {
		return nil, err
	}
	return data, nil
}

// itemBytes is implemented by sources that hold their items in memory.
type itemBytes interface {
	itemBytes(ctx context.Context, path string) ([]byte, error)
}

// readInto reads the item at path into buf, which it resets first.
func readInto(ctx context.Context, src Source, path string, buf *bytes.Buffer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rc, err := src.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("restoreorder: open item %s: %w", path, err)
	}
	defer rc.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(rc); err != nil {
		return fmt.Errorf("restoreorder: read item %s: %w", path, err)
	}
	return nil
}

// checkObject fails with ErrInvalidItem unless data is one JSON object.
func checkObject(path string, data []byte) error {
	if err := checkBrace(path, data); err != nil {
		return err
	}
	if !json.Valid(data) {
		return fmt.Errorf("restoreorder: item %s: %w: not valid JSON", path, ErrInvalidItem)
	}
	return nil
}

// checkBrace fails with ErrInvalidItem unless data starts, after white space, with "{".
func checkBrace(path string, data []byte) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("restoreorder: item %s: %w: not a JSON object", path, ErrInvalidItem)
	}
	return nil
}

// labelsOnly is the part of an item that label selectors look at.
type labelsOnly struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

// decodeLabels returns the metadata.labels of the item in data, decoded into scratch,
// whose map is cleared and reused: the result is valid until the next call with the
// same scratch. Nothing else of the item is decoded; the rest is only scanned.
func decodeLabels(path string, data []byte, scratch *labelsOnly) (map[string]string, error) {
	if err := checkBrace(path, data); err != nil {
		return nil, err
	}
	clear(scratch.Metadata.Labels)
	if err := json.Unmarshal(data, scratch); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("restoreorder: item %s: %w: not valid JSON: %v", path, ErrInvalidItem, err)
		}
		return nil, fmt.Errorf("restoreorder: item %s: %w: %v", path, ErrInvalidItem, err)
	}
	return scratch.Metadata.Labels, nil
}

// labelReader reads items' labels for Collect, reusing one buffer and one map for all
// of them: the labels it returns are valid until its next call.
type labelReader struct {
	src     Source
	buf     bytes.Buffer
	scratch labelsOnly
}

func (r *labelReader) labels(ctx context.Context, path string) (map[string]string, error) {
	switch s := r.src.(type) {
	case LabelSource:
		return s.Labels(ctx, path)
	case itemBytes:
		data, err := s.itemBytes(ctx, path)
		if err != nil {
			return nil, err
		}
		return decodeLabels(path, data, &r.scratch)
	}
	if err := readInto(ctx, r.src, path, &r.buf); err != nil {
		return nil, err
	}
	return decodeLabels(path, r.buf.Bytes(), &r.scratch)
}
