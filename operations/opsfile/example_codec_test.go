package opsfile_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// exampleOps returns the operations the examples write: two of one backup.
func exampleOps() []operations.Operation {
	owner := operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "f8c72709-0f73-46e1-a071-116bc4a76b07"}
	created := time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)
	return []operations.Operation{{
		Owner:    owner,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "my-app", Name: "data-0"},
		ID:       "op-1",
		Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 12345, NTotal: 99999,
			OperationUnits: "Bytes", Created: created},
	}, {
		Owner:    owner,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "my-app", Name: "data-1"},
		ID:       "op-2",
		Status:   operations.Status{Phase: operations.OperationCompleted, Created: created},
	}}
}

// Encode writes the file Velero would write; gunzipped, it is one line of JSON.
func ExampleEncode() {
	var file bytes.Buffer
	if err := opsfile.Encode(&file, exampleOps()[:1]); err != nil {
		log.Fatal(err)
	}
	zr, err := gzip.NewReader(&file)
	if err != nil {
		log.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(text))
	// Output:
	// [{"spec":{"backupName":"backup-1","backupUID":"f8c72709-0f73-46e1-a071-116bc4a76b07","backupItemAction":"velero.io/csi-pvc-backupper","resourceIdentifier":{"Group":"","Resource":"persistentvolumeclaims","Namespace":"my-app","Name":"data-0"},"operationID":"op-1","postOperationItems":null},"status":{"phase":"InProgress","nCompleted":12345,"nTotal":99999,"operationUnits":"Bytes","created":"2022-12-14T12:00:00Z"}}]
}

func ExampleDecode() {
	var file bytes.Buffer
	if err := opsfile.Encode(&file, exampleOps()); err != nil {
		log.Fatal(err)
	}
	ops, err := opsfile.Decode(&file, opsfile.ExpectKind(phase.Backup))
	if err != nil {
		log.Fatal(err)
	}
	for _, op := range ops {
		fmt.Println(op.Owner, op.ID, op.Resource, op.Status.Phase, op.Status.Created.Format(time.RFC3339))
	}
	// Output:
	// Backup/backup-1 op-1 persistentvolumeclaims my-app/data-0 InProgress 2022-12-14T12:00:00Z
	// Backup/backup-1 op-2 persistentvolumeclaims my-app/data-1 Completed 2022-12-14T12:00:00Z
}

// A file that is cut short, or larger than the decoder allows, gives a *DecodeError that
// says where, and wraps a sentinel to branch on.
func ExampleDecode_errors() {
	var file bytes.Buffer
	if err := opsfile.Encode(&file, exampleOps()); err != nil {
		log.Fatal(err)
	}
	truncated := file.Bytes()[:file.Len()-4]
	_, err := opsfile.Decode(bytes.NewReader(truncated))
	fmt.Println(errors.Is(err, opsfile.ErrMalformed), err)

	_, err = opsfile.Decode(bytes.NewReader(file.Bytes()), opsfile.WithSizeLimit(100))
	fmt.Println(errors.Is(err, opsfile.ErrTooLarge), err)
	// Output:
	// true decode operations: json offset 768: malformed operations file: the gzip data is truncated: unexpected EOF
	// true decode operations: json offset 101: the decompressed file is larger than the size limit of 100 bytes: input too large
}

// An Encoder writes records as they come, for lists too long to hold in memory.
func ExampleNewEncoder() {
	var file bytes.Buffer
	enc := opsfile.NewEncoder(&file, phase.Backup)
	for _, op := range exampleOps() {
		if err := enc.Encode(op); err != nil {
			log.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil { // ends the array and the gzip stream
		log.Fatal(err)
	}
	ops, err := opsfile.Decode(&file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ops), "operations")
	// Output:
	// 2 operations
}

// A Decoder reads one record at a time and tells the kind of the file from its content.
func ExampleNewDecoder() {
	var file bytes.Buffer
	if err := opsfile.Encode(&file, exampleOps()); err != nil {
		log.Fatal(err)
	}
	dec, err := opsfile.NewDecoder(&file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kind:", dec.Kind())
	for {
		op, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(op.ID, op.Status.Phase)
	}
	// Output:
	// kind: Backup
	// op-1 InProgress
	// op-2 Completed
}

// All ranges over the records; the loop sees an error at most once, last.
func ExampleDecoder_All() {
	var file bytes.Buffer
	if err := opsfile.Encode(&file, exampleOps()); err != nil {
		log.Fatal(err)
	}
	dec, err := opsfile.NewDecoder(&file)
	if err != nil {
		log.Fatal(err)
	}
	unfinished := 0
	for op, err := range dec.All() {
		if err != nil {
			log.Fatal(err)
		}
		if !op.Status.Phase.Finished() {
			unfinished++
		}
	}
	fmt.Println(unfinished, "unfinished")
	// Output:
	// 1 unfinished
}

func ExampleBackupOperationsKey() {
	fmt.Println(opsfile.BackupOperationsKey("backup-1"))
	fmt.Println(opsfile.RestoreOperationsKey("restore-1"))
	// A bucket prefix goes in front.
	fmt.Println(strings.Join([]string{"velero", opsfile.BackupOperationsKey("backup-1")}, "/"))
	// Output:
	// backups/backup-1/backup-1-itemoperations.json.gz
	// restores/restore-1/restore-restore-1-itemoperations.json.gz
	// velero/backups/backup-1/backup-1-itemoperations.json.gz
}
