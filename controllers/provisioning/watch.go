package provisioning

import (
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// workqueueAny is the queue type handler funcs receive; the provisioner never enqueues.
type workqueueAny = workqueue.TypedRateLimitingInterface[reconcile.Request]

// sourceFor watches obj through the manager's cache with h.
func sourceFor(mgr ctrl.Manager, obj client.Object, h handler.EventHandler) source.Source {
	return source.Kind[client.Object](mgr.GetCache(), obj, h)
}
