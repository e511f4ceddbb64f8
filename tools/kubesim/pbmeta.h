/* A minimal reader for Kubernetes protobuf request bodies ("k8s\0" + runtime.Unknown), enough
 * for the objects kubectl's generators send as protobuf with only metadata that matters
 * (`kubectl create namespace`): it recovers apiVersion, kind and ObjectMeta's name,
 * generateName, namespace, labels and annotations. Everything else in the body is ignored. */
#ifndef KUBESIM_PBMETA_H
#define KUBESIM_PBMETA_H

#include <jansson.h>
#include <stddef.h>

/* Returns 1 when buf starts with the Kubernetes protobuf magic. */
int pbmeta_is_protobuf(const char *buf, size_t len);
/* Decodes buf[0..len). Returns a new object {apiVersion, kind, metadata{...}} (caller owns it),
 * or NULL when the bytes are malformed. */
json_t *pbmeta_decode(const char *buf, size_t len);

#endif
