// grpc-js service definitions built from the generated protobuf-es descriptors: the descriptors are the
// one source of method paths and message types for the server, the tests and the load generator.
import { fromBinary, toBinary, type DescMessage, type DescService, type MessageShape } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, file_google_protobuf_timestamp } from '@bufbuild/protobuf/wkt';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { file_matchmaker_admin_v1_admin, MatchmakerAdminService } from '../gen/matchmaker/admin/v1/admin_pb.js';
import { file_matchmaker_core_v1_resources } from '../gen/matchmaker/core/v1/resources_pb.js';
import { file_matchmaker_core_v1_service, MatchmakerService } from '../gen/matchmaker/core/v1/service_pb.js';
import { file_matchmaker_engines_standard_v1_engine } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { file_matchmaker_outcomes_v1_outcomes } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

export { MatchmakerAdminService, MatchmakerService };

/**
 * The full definition: requests and responses are protobuf-es messages. Clients use it as it is. The server
 * passes `rawRequests`, so a request that does not decode reaches the handler as bytes and is answered
 * INVALID_ARGUMENT by it, rather than INTERNAL by grpc-js.
 */
export function grpcServiceDefinition(service: DescService, options: { rawRequests?: boolean } = {}): ServiceDefinition {
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    const input: DescMessage = method.input;
    const output: DescMessage = method.output;
    definition[method.name] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      originalName: method.localName,
      requestSerialize: (m) => Buffer.from(toBinary(input, m as MessageShape<DescMessage>)),
      requestDeserialize: options.rawRequests ? (b: Buffer) => b : (b: Buffer) => fromBinary(input, b),
      responseSerialize: (m) => Buffer.from(toBinary(output, m as MessageShape<DescMessage>)),
      responseDeserialize: (b: Buffer) => fromBinary(output, b),
    };
  }
  return definition as ServiceDefinition;
}

/**
 * What server reflection serves: our files as declared in proto/ (the descriptors protoc-gen-es embeds,
 * snake_case field names included), their imports, and the health service's file.
 */
export function reflectionPackageDefinition(): Record<string, { fileDescriptorProtos: Buffer[] }> {
  const files = [
    file_google_protobuf_timestamp,
    file_matchmaker_core_v1_resources,
    file_matchmaker_core_v1_service,
    file_matchmaker_outcomes_v1_outcomes,
    file_matchmaker_engines_standard_v1_engine,
    file_matchmaker_admin_v1_admin,
  ];
  const ours = files.map((f) => Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto)));
  const health = Object.values(healthService).flatMap((m) => (m.requestType as { fileDescriptorProtos: Buffer[] }).fileDescriptorProtos);
  return { matchmaker: { fileDescriptorProtos: ours }, health: { fileDescriptorProtos: health } };
}
