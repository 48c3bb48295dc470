package main

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/integrations/controllerruntime"
)

// GroupVersion is the API group and version of the operator's resource.
var GroupVersion = schema.GroupVersion{Group: "example.itemops.io", Version: "v1"}

// AddToScheme registers AppBackup and AppBackupList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &AppBackup{}, &AppBackupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// An AppBackup asks the operator to back up the data of an application's volume claims.
// Its status mirrors the itemops run that does it.
type AppBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AppBackupSpec   `json:"spec,omitempty"`
	Status AppBackupStatus `json:"status,omitempty"`
}

// AppBackupSpec names the volume claims to back up, in the AppBackup's namespace.
type AppBackupSpec struct {
	VolumeClaims []string `json:"volumeClaims,omitempty"`
}

// AppBackupStatus is the backup's run: phase, operation counts and conditions.
type AppBackupStatus struct {
	controllerruntime.RunStatus `json:",inline"`
}

// DeepCopyObject returns a deep copy of b, as runtime.Object requires. (Generated
// operators have controller-gen write these.)
func (b *AppBackup) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.VolumeClaims = slices.Clone(b.Spec.VolumeClaims)
	b.Status.RunStatus.DeepCopyInto(&out.Status.RunStatus)
	return &out
}

// AppBackupList is a list of AppBackups.
type AppBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppBackup `json:"items"`
}

// DeepCopyObject returns a deep copy of l.
func (l *AppBackupList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]AppBackup, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*AppBackup)
	}
	return &out
}
