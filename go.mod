module github.com/itemops/itemops

go 1.23.0

require (
	github.com/google/go-cmp v0.6.0
	github.com/looplab/fsm v1.0.3
	github.com/stretchr/testify v1.10.0
	go.etcd.io/bbolt v1.4.3
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
