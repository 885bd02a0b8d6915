// Command toposched-kube-scheduler is kube-scheduler v1.37 with the Toposched plugin
// (package scheduler) compiled in: every flag and KubeSchedulerConfiguration field of
// kube-scheduler works as upstream; a profile enables the plugin by name and gives its args
// (deploy/kubernetes/scheduler-plugin-config.yaml, docs/kubernetes.md "The plugin build").
//
//	toposched-kube-scheduler --config=scheduler-plugin-config.yaml [kube-scheduler flags]
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/toposched/toposched/kube/scheduler"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(scheduler.Name, scheduler.New))
	os.Exit(cli.Run(command))
}
