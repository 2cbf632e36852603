-- Argo CD health check for audittrail.dev/WebhookEndpoint
-- (resource.customizations.health.audittrail.dev_WebhookEndpoint). Healthy while the endpoint receives
-- deliveries; Degraded when it was auto-disabled (bump the audittrail.dev/recreate annotation to get a new
-- one) or its spec was refused; Progressing until the controller has observed the current generation.
local hs = { status = "Progressing", message = "Waiting for the audit-trail controller" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "Waiting for the controller to observe generation " .. obj.metadata.generation
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    end
    hs.message = condition.message or condition.reason
    return hs
  end
end
return hs
