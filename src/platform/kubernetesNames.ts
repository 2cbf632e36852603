/** Kubernetes object names (k8s.io/apimachinery validation): what the API server accepts, checked before it is asked. */

/** A DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending alphanumeric. */
export const DNS_LABEL_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_LABEL_MAX_LENGTH = 63;

/** A DNS-1123 subdomain: labels joined by '.', at most 253 characters (most object names, Secrets and Leases among them). */
export const DNS_SUBDOMAIN_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const DNS_SUBDOMAIN_MAX_LENGTH = 253;
