module github.com/itemops/itemops

go 1.23.0

require (
	github.com/google/go-cmp v0.6.0
	github.com/looplab/fsm v1.0.3
	github.com/stretchr/testify v1.10.0
	go.etcd.io/bbolt v1.4.3
	go.uber.org/goleak v1.3.0
	k8s.io/apimachinery v0.31.0
)

require (
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	golang.org/x/sys v0.29.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/utils v0.0.0-20240711033017-18e509b52bc8 // indirect
)
