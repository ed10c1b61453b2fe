package v1

import "maps"

// DeepCopyInto copies the labels and annotations of in into out.
func (in *TemplateObjectMeta) DeepCopyInto(out *TemplateObjectMeta) {
	out.Labels = maps.Clone(in.Labels)
	out.Annotations = maps.Clone(in.Annotations)
}

// DeepCopy returns a deep copy of in, or nil when in is nil.
func (in *TemplateObjectMeta) DeepCopy() *TemplateObjectMeta {
	if in == nil {
		return nil
	}
	out := new(TemplateObjectMeta)
	in.DeepCopyInto(out)
	return out
}
