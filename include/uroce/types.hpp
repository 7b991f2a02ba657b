// The vocabulary of the uroce C++ API: the engine's ibverbs-shaped types (same numeric values
// as <infiniband/verbs.h>) and the device's attribute structs, re-exported under uroce::.
// Nothing is duplicated: uroce::WcStatus IS transport::WcStatus.
#pragma once

#include "uroce/vocab/counters.hpp"
#include "uroce/vocab/device_types.hpp"
#include "uroce/vocab/verbs_types.hpp"

namespace uroce {

using transport::AhAttr;
using transport::AsyncEvent;
using transport::Counter;
using transport::Counters;
using transport::CqId;
using transport::EventType;
using transport::MrInfo;
using transport::Mtu;
using transport::mtu_bytes;
using transport::MwBind;
using transport::MwType;
using transport::PdId;
using transport::QpAttr;
using transport::QpCap;
using transport::QpInitAttr;
using transport::QpState;
using transport::QpType;
using transport::Recovery;
using transport::RecvWr;
using transport::Result;
using transport::SendWr;
using transport::Sge;
using transport::SrqAttr;
using transport::SrqId;
using transport::SrqInitAttr;
using transport::Status;
using transport::Wc;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;

// Flag constants (unscoped enums with ibverbs bit values).
using enum transport::Access;
using enum transport::SendFlag;
using enum transport::WcFlag;
using enum transport::QpAttrMask;
using enum transport::SrqAttrMask;
using enum transport::FlushType;   // SendWr::flush.type (IBA 1.5 FLUSH placement type)
using enum transport::FlushLevel;  // SendWr::flush.level (selectivity)

using device::AtomicCap;
using device::DeviceAttr;
using device::Gid;
using device::PortAttr;
using device::PortState;
using device::ProgressOptions;

}  // namespace uroce
