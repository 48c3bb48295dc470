package opsfile

// BackupOperationsKey returns the object-store key of the itemoperations file of backup
// backup, as Velero lays out its bucket: "backups/<backup>/<backup>-itemoperations.json.gz".
// The name is used verbatim (Kubernetes object names need no escaping); a caller whose
// backups live under a bucket prefix joins it in front with [path.Join].
func BackupOperationsKey(backup string) string {
	return "backups/" + backup + "/" + backup + "-itemoperations.json.gz"
}

// RestoreOperationsKey returns the object-store key of the itemoperations file of restore
// restore, as Velero lays out its bucket:
// "restores/<restore>/restore-<restore>-itemoperations.json.gz". The name is used
// verbatim; a caller whose restores live under a bucket prefix joins it in front with
// [path.Join].
func RestoreOperationsKey(restore string) string {
	return "restores/" + restore + "/restore-" + restore + "-itemoperations.json.gz"
}
