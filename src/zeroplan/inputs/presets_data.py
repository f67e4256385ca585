"""Built-in presets, validated: generated from presets/*.yaml by `python -m zeroplan.inputs.preset_schema --write`. Do not edit."""
# ruff: noqa

true, false, null = True, False, None

GPUS = {
 "v100-32g": {
  "description": "NVIDIA Tesla V100 SXM2 32GB (Volta). No BF16 support: bf16_tflops holds the FP16 tensor core figure (125 TFLOP/s), so plan with fp16 on this GPU.",
  "memory": "32510MiB",
  "hbm_bandwidth": "900GB/s",
  "bf16_tflops": 125.0,
  "bf16": false,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "150GB/s",
   "latency_us": 3.0
  },
  "default_cluster": null,
  "sources": [
   "https://images.nvidia.com/content/technologies/volta/pdf/tesla-volta-v100-datasheet-letter-fnl-web.pdf",
   "public nvidia-smi transcripts (Tesla V100-SXM2-32GB, 0MiB / 32510MiB)",
   "zeroplan docs/formulas.md §19.1 (hardware figures)"
  ]
 },
 "a100-40g": {
  "description": "NVIDIA A100 SXM4 40GB (Ampere), HBM2, NVLink 3.",
  "memory": "40536MiB",
  "hbm_bandwidth": "1555GB/s",
  "bf16_tflops": 312.0,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "300GB/s",
   "latency_us": 3.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
   "NVIDIA A100 Tensor Core GPU Architecture whitepaper, Table (Peak BF16 Tensor TFLOPS 312/624)",
   "public nvidia-smi transcripts (A100-SXM4-40GB, 0MiB / 40536MiB)"
  ]
 },
 "a100-80g": {
  "description": "NVIDIA A100 SXM4 80GB (Ampere), HBM2e, NVLink 3.",
  "memory": "81920MiB",
  "hbm_bandwidth": "2039GB/s",
  "bf16_tflops": 312.0,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "300GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "dgx-a100",
  "sources": [
   "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
   "public nvidia-smi transcripts (NVIDIA A100-SXM4-80GB, 0MiB / 81920MiB)",
   "zeroplan docs/formulas.md §19.1 (hardware figures)"
  ]
 },
 "h100-80g": {
  "description": "NVIDIA H100 SXM5 80GB HBM3 (Hopper), NVLink 4.",
  "memory": "81559MiB",
  "hbm_bandwidth": "3350GB/s",
  "bf16_tflops": 989.4,
  "bf16": true,
  "fp8_tflops": 1978.9,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "450GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "dgx-h100",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/h100/",
   "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5 column)",
   "public nvidia-smi transcripts (NVIDIA H100 80GB HBM3, 0MiB / 81559MiB)"
  ]
 },
 "h800-80g": {
  "description": "NVIDIA H800 SXM5 80GB (Hopper, the export variant DeepSeek-V3 was trained on): H100 SXM compute and memory, NVLink cut to 400 GB/s (bidirectional, against H100's 900).",
  "memory": "81559MiB",
  "hbm_bandwidth": "3350GB/s",
  "bf16_tflops": 989.4,
  "bf16": true,
  "fp8_tflops": 1978.9,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "200GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "hgx-h800",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/h800/ (NVIDIA H800 Tensor Core GPU, NVLink 400GB/s)",
   "DeepSeek-V3 Technical Report, arXiv 2412.19437 §3.1-3.2.2 (2048 H800, NVLink 160 GB/s, IB 50 GB/s)"
  ]
 },
 "h200-141g": {
  "description": "NVIDIA H200 SXM 141GB HBM3e (Hopper), NVLink 4; same compute as H100 SXM.",
  "memory": "143771MiB",
  "hbm_bandwidth": "4800GB/s",
  "bf16_tflops": 989.4,
  "bf16": true,
  "fp8_tflops": 1978.9,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "450GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "hgx-h200",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/h200/",
   "MLCommons inference v4.1 NVIDIA H200-SXM-141GBx8 system description (18x 4th Gen NVLink, 900GB/s)",
   "public nvidia-smi transcripts (NVIDIA H200, 0MiB / 143771MiB)"
  ]
 },
 "b200": {
  "description": "NVIDIA B200 (Blackwell) as in HGX/DGX B200, 180GB HBM3e per GPU, NVLink 5.",
  "memory": "183359MiB",
  "hbm_bandwidth": "8000GB/s",
  "bf16_tflops": 2250.0,
  "bf16": true,
  "fp8_tflops": 4500.0,
  "mxfp8": true,
  "intra_node_link": {
   "bandwidth": "900GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "dgx-b200",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/dgx-b200/",
   "https://www.nvidia.com/en-us/data-center/hgx/",
   "public nvidia-smi transcripts (NVIDIA B200, 0MiB / 183359MiB)",
   "zeroplan docs/formulas.md §19.1 (hardware figures)"
  ]
 },
 "l40s": {
  "description": "NVIDIA L40S 48GB GDDR6 (Ada), PCIe Gen4 x16 only, no NVLink. NVIDIA does not say whether the 362 TFLOP/s BF16 figure is FP32- or FP16-accumulate; treat it as an upper bound.",
  "memory": "46068MiB",
  "hbm_bandwidth": "864GB/s",
  "bf16_tflops": 362.05,
  "bf16": true,
  "fp8_tflops": 733.0,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "31.5GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/l40s/",
   "public nvidia-smi transcripts (NVIDIA L40S, 0MiB / 46068MiB)"
  ]
 },
 "mi300x": {
  "description": "AMD Instinct MI300X 192GB HBM3 (CDNA 3), OAM, 8-GPU fully connected Infinity Fabric (xGMI) mesh. intra_node_link is the per-GPU aggregate over its 7 links; one peer pair gets only one link (64 GB/s per direction).",
  "memory": "196288MiB",
  "hbm_bandwidth": "5300GB/s",
  "bf16_tflops": 1307.4,
  "bf16": true,
  "fp8_tflops": 2614.9,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "448GB/s",
   "latency_us": 5.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
   "AMD Instinct MI300X data sheet (peak BF16 1307.4 TFLOPS, 7 Infinity Fabric links, 128 GB/s each)",
   "public rocm-smi transcripts (AMD Instinct MI300X, VRAM Total Memory (B) 205822885888)"
  ]
 },
 "rtx3090": {
  "description": "NVIDIA GeForce RTX 3090 24GB GDDR6X (Ampere GA102), PCIe Gen4 x16. GeForce cards run FP16/BF16 tensor math with FP32 accumulate at half rate: 71 TFLOP/s dense BF16 (the often quoted 142 is FP16 with FP16 accumulate).",
  "memory": "24576MiB",
  "hbm_bandwidth": "936GB/s",
  "bf16_tflops": 71.0,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "31.5GB/s",
   "latency_us": 10.0
  },
  "default_cluster": "workstation-4x3090",
  "sources": [
   "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
   "public nvidia-smi transcripts (NVIDIA GeForce RTX 3090, 0MiB / 24576MiB)"
  ]
 },
 "rtx4090": {
  "description": "NVIDIA GeForce RTX 4090 24GB GDDR6X (Ada AD102), PCIe Gen4 x16, no NVLink and no GPU peer-to-peer: inter-GPU traffic is staged through host memory.",
  "memory": "24564MiB",
  "hbm_bandwidth": "1008GB/s",
  "bf16_tflops": 165.2,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "31.5GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
   "public nvidia-smi transcripts (NVIDIA GeForce RTX 4090, 0MiB / 24564MiB)"
  ]
 },
 "v100-16g": {
  "description": "NVIDIA Tesla V100 SXM2 16GB (Volta), e.g. AWS p3.16xlarge / DGX-1V. No BF16 support: bf16_tflops holds the FP16 tensor core figure (125 TFLOP/s), so plan with fp16.",
  "memory": "16160MiB",
  "hbm_bandwidth": "900GB/s",
  "bf16_tflops": 125.0,
  "bf16": false,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "150GB/s",
   "latency_us": 3.0
  },
  "default_cluster": null,
  "sources": [
   "https://images.nvidia.com/content/technologies/volta/pdf/tesla-volta-v100-datasheet-letter-fnl-web.pdf",
   "public nvidia-smi transcripts (Tesla V100-SXM2-16GB, 0MiB / 16160MiB; Tesla V100-PCIE-16GB, 0MiB / 16160MiB)",
   "zeroplan docs/formulas.md §19.1 (hardware figures)"
  ]
 },
 "h100-pcie": {
  "description": "NVIDIA H100 PCIe 80GB HBM2e (Hopper, 114 SMs), PCIe Gen5 x16. An optional NVLink bridge joins pairs of cards (600 GB/s bidirectional within the pair only); intra_node_link is PCIe Gen5, the path every pair of GPUs in an 8-card server has.",
  "memory": "81559MiB",
  "hbm_bandwidth": "2000GB/s",
  "bf16_tflops": 756.0,
  "bf16": true,
  "fp8_tflops": 1513.0,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "63GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/h100/",
   "NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 PCIe column, BF16 756/1513, 2000 GB/s)",
   "public nvidia-smi transcripts (NVIDIA H100 PCIe, 81559 MiB)"
  ]
 },
 "h100-nvl": {
  "description": "NVIDIA H100 NVL 94GB HBM3 (Hopper), PCIe Gen5 x16 dual-slot card with NVLink bridges (2-way: 600 GB/s bidirectional between the bridged pair). intra_node_link is PCIe Gen5 (the path between cards that share no bridge); override it for a bridged pair.",
  "memory": "95830MiB",
  "hbm_bandwidth": "3900GB/s",
  "bf16_tflops": 835.5,
  "bf16": true,
  "fp8_tflops": 1670.5,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "63GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/h100/",
   "NVIDIA H100 NVL product brief (94 GB HBM3, 3.9 TB/s, NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s)",
   "public nvidia-smi transcripts (NVIDIA H100 NVL, 95830 MiB)"
  ]
 },
 "h100-96g-500w": {
  "description": "NVIDIA H100 SXM 96GB HBM2e (Hopper, 132 SMs) at a 500 W power limit, as in Meta's Grand Teton hosts (torchtitan's H100 benchmarks, the torchtitan paper). Not an NVIDIA catalogue part: its tensor peak is unpublished; the benchmark puts it between the H100 NVL and the H100 SXM, and this preset takes the geometric midpoint of those two published rates (see bf16_tflops).",
  "memory": "95GiB",
  "hbm_bandwidth": "2400GB/s",
  "bf16_tflops": 909.2,
  "bf16": true,
  "fp8_tflops": 1818.2,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "450GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "grand-teton-h100",
  "sources": [
   "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md (Hardware; footnote 2)",
   "https://arxiv.org/abs/2410.06511 (TorchTitan paper; non-standard H100s, HBM2e, lower TDP, peak between SXM and NVL)",
   "https://github.com/pytorch/torchtitan/pull/800 (docs/performance.md, \"NVIDIA H100 GPUs with 95 GiB memory\")",
   "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM and H100 NVL dense tensor rates, the bracket)",
   "zeroplan docs/formulas.md §19.1 (hardware figures)"
  ]
 },
 "gb200": {
  "description": "NVIDIA Blackwell GPU of a GB200 superchip, as in GB200 NVL72 (72 GPUs on one NVLink 5 switch domain). 186 GB HBM3e class per GPU; the Grace CPU attaches over NVLink-C2C (900 GB/s bidirectional), not PCIe.",
  "memory": "189471MiB",
  "hbm_bandwidth": "8000GB/s",
  "bf16_tflops": 2500.0,
  "bf16": true,
  "fp8_tflops": 5000.0,
  "mxfp8": true,
  "intra_node_link": {
   "bandwidth": "900GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "gb200-nvl72",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
   "https://docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/system.html",
   "public nvidia-smi transcripts (NVIDIA GB200, 189471 MiB)"
  ]
 },
 "gb300": {
  "description": "NVIDIA Blackwell Ultra GPU of a GB300 superchip, as in GB300 NVL72 (72 GPUs on one NVLink 5 switch domain). 288 GB HBM3e per GPU (12-high stacks); the Grace CPU attaches over NVLink-C2C, not PCIe. Same dense BF16 and FP8 tensor rates as GB200; the gains are FP4 and attention's exponentials (SFU): the step time prices flash attention at 1.35x the Blackwell ceiling (core.timing.machine BLACKWELL_ULTRA_ATTENTION_SPEEDUP), not FP4.",
  "memory": "279GiB",
  "hbm_bandwidth": "8000GB/s",
  "bf16_tflops": 2500.0,
  "bf16": true,
  "fp8_tflops": 5000.0,
  "mxfp8": true,
  "intra_node_link": {
   "bandwidth": "900GB/s",
   "latency_us": 3.0
  },
  "default_cluster": "gb300-nvl72",
  "sources": [
   "https://www.nvidia.com/en-us/data-center/gb300-nvl72/",
   "https://docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory/latest/components.html",
   "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B300, 2.3 TB HBM3e for 8 GPUs)"
  ]
 },
 "a10g": {
  "description": "NVIDIA A10G 24GB GDDR6 (Ampere GA102, AWS-specific variant of the A10; AWS g5 instances), PCIe Gen4 x16, no NVLink. Tensor throughput is lower than the A10's 125 TFLOP/s: FP16/BF16 with FP32 accumulate runs at half rate on this part.",
  "memory": "23028MiB",
  "hbm_bandwidth": "600GB/s",
  "bf16_tflops": 70.0,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "31.5GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/g5/",
   "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
   "public nvidia-smi transcripts (NVIDIA A10G, 23028 MiB)"
  ]
 },
 "l4": {
  "description": "NVIDIA L4 24GB GDDR6 (Ada AD104), 72 W low-profile PCIe Gen4 x16 card, no NVLink (GCP g2, AWS g6). NVIDIA does not say whether the BF16 figure is FP32-accumulate; treat it as an upper bound.",
  "memory": "23034MiB",
  "hbm_bandwidth": "300GB/s",
  "bf16_tflops": 121.0,
  "bf16": true,
  "fp8_tflops": 242.0,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "31.5GB/s",
   "latency_us": 10.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/l4/",
   "NVIDIA L4 Tensor Core GPU datasheet (24 GB GDDR6, 300 GB/s, BF16 242 TFLOPS with sparsity)",
   "public nvidia-smi transcripts (NVIDIA L4, 23034 MiB)"
  ]
 },
 "mi250x-gcd": {
  "description": "One GCD (graphics compute die) of an AMD Instinct MI250X OAM (CDNA 2), as ROCm, PyTorch and Slurm see it: each MI250X appears as two 64 GB devices. Figures are half the per-OAM datasheet values. intra_node_link is the single Infinity Fabric link (50 GB/s per direction) that bounds a ring over the 8 GCDs of a 4x MI250X node (e.g. Frontier/LUMI); the two GCDs of one package share 4 links (200 GB/s per direction).",
  "memory": "65520MiB",
  "hbm_bandwidth": "1638.4GB/s",
  "bf16_tflops": 191.5,
  "bf16": true,
  "fp8_tflops": null,
  "mxfp8": false,
  "intra_node_link": {
   "bandwidth": "50GB/s",
   "latency_us": 5.0
  },
  "default_cluster": null,
  "sources": [
   "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html",
   "AMD Instinct MI250X data sheet (128 GB HBM2e, 3.2768 TB/s, peak BF16 383.0 TFLOPS, 8 Infinity Fabric links)",
   "public HIP/Cray ACC transcripts (AMD Instinct MI250X, Total GPU memory 68702699520)",
   "https://docs.olcf.ornl.gov/systems/frontier_user_guide.html (node topology, GCD-GCD links)"
  ]
 }
}

CLUSTERS = {
 "dgx-a100": {
  "description": "NVIDIA DGX A100 640GB: 8x A100 SXM4 80GB on NVSwitch, 2x AMD EPYC 7742, 2 TB RAM, 8x ConnectX-6 HDR 200 Gb/s compute NICs (one per GPU), 30 TB NVMe cache (8x 3.84 TB U.2). The 320GB model (A100 40GB) ships 1 TB RAM and a 15 TB cache (4x 3.84 TB).",
  "gpu": "a100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "200Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://images.nvidia.com/aem-dam/Solutions/Data-Center/nvidia-dgx-a100-datasheet.pdf",
   "https://developer.nvidia.com/blog/defining-ai-innovation-with-dgx-a100",
   "https://www.microway.com/hpc-tech-tips/dgx-a100-review-throughput-and-hardware-summary/"
  ]
 },
 "dgx-h100": {
  "description": "NVIDIA DGX H100: 8x H100 SXM5 80GB on NVSwitch, 2x Xeon Platinum 8480C, 2 TB RAM, 8x ConnectX-7 NDR 400 Gb/s compute NICs (one per GPU), 30 TB NVMe cache (8x 3.84 TB U.2).",
  "gpu": "h100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/dgx-h100/",
   "NVIDIA DGX H100 User Guide, hardware overview (8x 3.84 TB NVMe U.2, 2 TB system memory)",
   "MLCommons inference v3.1 Dell XE9680 H100 SXM 80GBx8 system description (2 TB host memory, 8x 400Gb InfiniBand)"
  ]
 },
 "hgx-h800": {
  "description": "8x H800 SXM5 80GB on NVSwitch with one 400 Gb/s InfiniBand NIC per GPU, as DeepSeek-V3's cluster (2048 H800 in 256 nodes). Host memory and NVMe are not published: DGX H100's are assumed.",
  "gpu": "h800-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "DeepSeek-V3 Technical Report, arXiv 2412.19437 §3.1 (H800 nodes, NVLink/NVSwitch inside, InfiniBand across)"
  ]
 },
 "grand-teton-h100": {
  "description": "Meta's Grand Teton host as torchtitan benchmarked it: 8x H100 SXM 96GB HBM2e at 500 W, fully connected with NVLink, 400 Gb/s per GPU of backend RDMA network between hosts. Host memory and NVMe are not published: DGX H100's are assumed.",
  "gpu": "h100-96g-500w",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3_h100_202412_torchtitan.md (Hardware)",
   "https://engineering.fb.com/2022/10/18/open-source/ocp-summit-2022-grand-teton/"
  ]
 },
 "hgx-h200": {
  "description": "8x H200 SXM 141GB on NVSwitch (HGX H200 baseboard), configured like NVIDIA DGX H200: 2 TB RAM (32 DIMMs), 8x ConnectX-7 400 Gb/s compute NICs, 30 TB NVMe (8x 3.84 TB U.2). OEM HGX H200 servers vary; override cpu_memory and nvme for yours.",
  "gpu": "h200-141g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/dgx-h200/",
   "MLCommons inference v4.1 NVIDIA H200-SXM-141GBx8 system description (2 TB host memory, 32x 64GB)"
  ]
 },
 "dgx-b200": {
  "description": "NVIDIA DGX B200: 8x B200 (180 GB each, 1,440 GB total) on NVLink 5 switches, 2 TB RAM (configurable to 4 TB), 8x ConnectX-7 400 Gb/s compute NICs, 30 TB NVMe (8x 3.84 TB U.2).",
  "gpu": "b200",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/dgx-b200/"
  ]
 },
 "workstation-4x3090": {
  "description": "A single workstation: 4x GeForce RTX 3090 on PCIe Gen4 x16 (no NVLink), 256 GB RAM, one 2 TB NVMe SSD at ~7 GB/s. Single node: the inter-node figures are nominal.",
  "gpu": "rtx3090",
  "gpus_per_node": 4,
  "inter_node_bandwidth_per_gpu": "10Gb/s",
  "inter_node_latency_us": 50.0,
  "cpu_memory": "256GB",
  "nvme": "2TB",
  "nvme_bandwidth": "7GB/s",
  "pcie_generation": 4,
  "sources": [
   "zeroplan issue, workstation example (4x RTX 3090, 256 GB RAM, 2 TB NVMe at ~7 GB/s)",
   "zeroplan docs/formulas.md §19.1 (NVMe ~7 GB/s per drive)"
  ]
 },
 "dgx-2": {
  "description": "NVIDIA DGX-2: 16x Tesla V100 SXM3 32GB on 12 NVSwitches (every GPU 300 GB/s bidirectional), 2x Xeon Platinum 8168, 1.5 TB RAM, 8x 100 Gb/s EDR InfiniBand (800 Gb/s per node), 30 TB NVMe (8x 3.84 TB). The ZeRO paper's hardware (arXiv 1910.02054: 400 V100s = 25 DGX-2 nodes, 800 Gbps inter-node). V100 has no bf16: plan fp16.",
  "gpu": "v100-32g",
  "gpus_per_node": 16,
  "inter_node_bandwidth_per_gpu": "50Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "1.5TB",
  "nvme": "30TB",
  "nvme_bandwidth": "16GB/s",
  "pcie_generation": 3,
  "sources": [
   "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/dgx-2/dgx-2-print-datasheet-738070-nvidia-a4-web-uk.pdf",
   "https://arxiv.org/abs/1910.02054 (ZeRO paper, 25 DGX-2 nodes = 400 V100s, 800 Gbps inter-node)",
   "public nvidia-smi transcripts (Tesla V100-SXM3-32GB, 32480MiB / 32510MiB)"
  ]
 },
 "gb200-nvl72": {
  "description": "NVIDIA GB200 NVL72 rack modelled as ONE node, because its NVLink domain is the whole rack: 72 Blackwell GPUs + 36 Grace CPUs (18 compute trays of 2 Grace + 4 GPUs), 9 NVLink switch trays, up to 17 TB LPDDR5X (480 GB per Grace), 4x ConnectX-7 400 Gb/s per tray (one per GPU), 4x E1.S NVMe cache per tray. Grace<->GPU is NVLink-C2C (900 GB/s bidirectional), much faster than the PCIe Gen5 the schema can express, so CPU offload is modelled pessimistically.",
  "gpu": "gb200",
  "gpus_per_node": 72,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "17TB",
  "nvme": "276.48TB",
  "nvme_bandwidth": "288GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
   "https://docs.nvidia.com/dgx/dgxgb200-user-guide/hardware.html (18 compute trays, 4x ConnectX-7 400G per tray)",
   "https://docs.nvidia.com/dgx/dgxgb200-user-guide/storage.html (E1.S NVMe cache in RAID 0 per tray)",
   "https://docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/system.html"
  ]
 },
 "gb300-nvl72": {
  "description": "NVIDIA GB300 NVL72 rack modelled as ONE node, because its NVLink domain is the whole rack: 72 Blackwell Ultra GPUs + 36 Grace CPUs (18 compute trays of 2 Grace + 4 GPUs), 9 NVLink switch trays (130 TB/s), 4x ConnectX-8 800 Gb/s per tray (one per GPU), 4x E1.S NVMe cache per tray. Grace<->GPU is NVLink-C2C, much faster than the PCIe Gen5 the schema can express, so CPU offload is modelled pessimistically.",
  "gpu": "gb300",
  "gpus_per_node": 72,
  "inter_node_bandwidth_per_gpu": "800Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "17TB",
  "nvme": "276.48TB",
  "nvme_bandwidth": "288GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.nvidia.com/en-us/data-center/gb300-nvl72/",
   "https://docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory/latest/components.html (4 ConnectX-8 per compute tray, 4 E1.S)"
  ]
 },
 "amd-mi300x-platform": {
  "description": "A generic 8x AMD Instinct MI300X server (AMD Instinct Platform UBB: 8 OAMs, fully connected Infinity Fabric, 1.5 TB HBM3), host configured like the OEM reference servers: 2x 4th/5th Gen EPYC or Xeon, 2 TB RAM, one 400 Gb/s NIC per GPU, 8x 3.84 TB NVMe. OEM systems vary; override cpu_memory, nvme and the NICs for yours.",
  "gpu": "mi300x",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2TB",
  "nvme": "30TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://www.amd.com/en/products/accelerators/instinct/mi300/platform.html",
   "AMD Instinct MI300X data sheet (7 Infinity Fabric links x 128 GB/s per GPU, PCIe Gen5 x16 host)"
  ]
 },
 "aws-p4d.24xlarge": {
  "description": "AWS EC2 p4d.24xlarge: 8x A100 SXM4 40GB on NVSwitch (600 GB/s), 96 vCPU Xeon Platinum 8275CL (Cascade Lake, PCIe Gen3 host), 1152 GiB RAM, 8x 1000 GB NVMe instance store, 400 Gbps EFA (4x 100 Gbps).",
  "gpu": "a100-40g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "50Gb/s",
  "inter_node_latency_us": 10.0,
  "cpu_memory": "1152GiB",
  "nvme": "8TB",
  "nvme_bandwidth": "16GB/s",
  "pcie_generation": 3,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/p4/",
   "https://aws.amazon.com/blogs/compute/amazon-ec2-p4d-instances-deep-dive/"
  ]
 },
 "aws-p4de.24xlarge": {
  "description": "AWS EC2 p4de.24xlarge: as p4d.24xlarge but 8x A100 SXM4 80GB (640 GB HBM2e); 96 vCPU, 1152 GiB RAM, 8x 1000 GB NVMe, 400 Gbps EFA.",
  "gpu": "a100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "50Gb/s",
  "inter_node_latency_us": 10.0,
  "cpu_memory": "1152GiB",
  "nvme": "8TB",
  "nvme_bandwidth": "16GB/s",
  "pcie_generation": 3,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/p4/",
   "https://aws.amazon.com/blogs/compute/amazon-ec2-p4d-instances-deep-dive/"
  ]
 },
 "aws-p5.48xlarge": {
  "description": "AWS EC2 p5.48xlarge: 8x H100 SXM 80GB on NVSwitch (900 GB/s), 192 vCPU 3rd Gen AMD EPYC (Milan, PCIe Gen4 host), 2 TiB RAM, 8x 3.84 TB NVMe instance store, 3200 Gbps EFA (v2).",
  "gpu": "h100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 10.0,
  "cpu_memory": "2TiB",
  "nvme": "30.72TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/p5/",
   "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
  ]
 },
 "aws-p5e.48xlarge": {
  "description": "AWS EC2 p5e.48xlarge: 8x H200 141GB on NVSwitch, 192 vCPU 3rd Gen AMD EPYC (Milan), 2 TiB RAM, 8x 3.84 TB NVMe, 3200 Gbps EFA.",
  "gpu": "h200-141g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 10.0,
  "cpu_memory": "2TiB",
  "nvme": "30.72TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/p5/",
   "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
  ]
 },
 "aws-p5en.48xlarge": {
  "description": "AWS EC2 p5en.48xlarge: 8x H200 141GB on NVSwitch, 192 vCPU Intel Xeon Sapphire Rapids with PCIe Gen5 to the GPUs, 2 TiB RAM, 8x 3.84 TB NVMe, 3200 Gbps EFAv3.",
  "gpu": "h200-141g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 10.0,
  "cpu_memory": "2TiB",
  "nvme": "30.72TB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/p5/",
   "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
  ]
 },
 "aws-g5.48xlarge": {
  "description": "AWS EC2 g5.48xlarge: 8x A10G 24GB on PCIe Gen4 (no NVLink), 192 vCPU 2nd Gen AMD EPYC (Rome), 768 GiB RAM, 2x 3800 GB NVMe instance store, 100 Gbps network (EFA capable).",
  "gpu": "a10g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "12.5Gb/s",
  "inter_node_latency_us": 15.0,
  "cpu_memory": "768GiB",
  "nvme": "7.6TB",
  "nvme_bandwidth": "4GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/g5/",
   "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
  ]
 },
 "aws-g5.12xlarge": {
  "description": "AWS EC2 g5.12xlarge: 4x A10G 24GB on PCIe Gen4 (no NVLink), 48 vCPU AMD EPYC (Rome), 192 GiB RAM, 1x 3800 GB NVMe instance store, 40 Gbps network.",
  "gpu": "a10g",
  "gpus_per_node": 4,
  "inter_node_bandwidth_per_gpu": "10Gb/s",
  "inter_node_latency_us": 15.0,
  "cpu_memory": "192GiB",
  "nvme": "3.8TB",
  "nvme_bandwidth": "2GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://aws.amazon.com/ec2/instance-types/g5/",
   "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
  ]
 },
 "gcp-a2-highgpu-8g": {
  "description": "Google Cloud a2-highgpu-8g: 8x A100 SXM4 40GB on NVSwitch, 96 vCPU Intel Cascade Lake (PCIe Gen3 host), 680 GB RAM, up to 100 Gbps network. Local SSD is optional (up to 8x 375 GiB = 3000 GiB, assumed attached here).",
  "gpu": "a100-40g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "12.5Gb/s",
  "inter_node_latency_us": 30.0,
  "cpu_memory": "680GB",
  "nvme": "3000GiB",
  "nvme_bandwidth": "3GB/s",
  "pcie_generation": 3,
  "sources": [
   "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a2-vms",
   "https://cloud.google.com/compute/docs/gpus#a100-gpus",
   "https://cloud.google.com/compute/docs/disks/local-ssd"
  ]
 },
 "gcp-a2-ultragpu-8g": {
  "description": "Google Cloud a2-ultragpu-8g: 8x A100 SXM4 80GB on NVSwitch, 96 vCPU Intel Cascade Lake (PCIe Gen3 host), 1360 GB RAM, 3000 GiB bundled local SSD, up to 100 Gbps network.",
  "gpu": "a100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "12.5Gb/s",
  "inter_node_latency_us": 30.0,
  "cpu_memory": "1360GB",
  "nvme": "3000GiB",
  "nvme_bandwidth": "3GB/s",
  "pcie_generation": 3,
  "sources": [
   "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a2-vms",
   "https://cloud.google.com/compute/docs/disks/local-ssd"
  ]
 },
 "gcp-a3-highgpu-8g": {
  "description": "Google Cloud a3-highgpu-8g (A3 High): 8x H100 SXM 80GB on NVSwitch, 208 vCPU Intel Sapphire Rapids, 1872 GB RAM, 6000 GiB bundled local SSD, 1000 Gbps network of which 4x 200 Gbps GPU NICs (GPUDirect-TCPX) = 800 Gbps for GPU traffic.",
  "gpu": "h100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "100Gb/s",
  "inter_node_latency_us": 15.0,
  "cpu_memory": "1872GB",
  "nvme": "6000GiB",
  "nvme_bandwidth": "6GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms",
   "https://cloud.google.com/compute/docs/gpus/gpudirect",
   "https://cloud.google.com/compute/docs/disks/local-ssd"
  ]
 },
 "gcp-a3-megagpu-8g": {
  "description": "Google Cloud a3-megagpu-8g (A3 Mega): 8x H100 SXM 80GB (\"Mega\") on NVSwitch, 208 vCPU Intel Sapphire Rapids, 1872 GB RAM, 6000 GiB bundled local SSD, 1800 Gbps network of which 8x 200 Gbps GPU NICs (GPUDirect-TCPXO) = 1600 Gbps for GPU traffic.",
  "gpu": "h100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "200Gb/s",
  "inter_node_latency_us": 15.0,
  "cpu_memory": "1872GB",
  "nvme": "6000GiB",
  "nvme_bandwidth": "6GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms",
   "https://cloud.google.com/compute/docs/gpus/gpudirect",
   "https://cloud.google.com/compute/docs/disks/local-ssd"
  ]
 },
 "gcp-a3-ultragpu-8g": {
  "description": "Google Cloud a3-ultragpu-8g (A3 Ultra): 8x H200 141GB on NVSwitch, 224 vCPU Intel Emerald Rapids, 2952 GB RAM, 12000 GiB bundled local SSD, 8x 400 Gbps ConnectX-7 RDMA (RoCE) GPU NICs (3200 Gbps) plus host networking.",
  "gpu": "h200-141g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "2952GB",
  "nvme": "12000GiB",
  "nvme_bandwidth": "12GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms",
   "https://github.com/GoogleCloudPlatform/cluster-toolkit/discussions/3478 (A3 Ultra, 8x H200, one CX-7 RDMA NIC per GPU)"
  ]
 },
 "azure-nd-a100-v4": {
  "description": "Azure Standard_ND96asr_v4 (ND A100 v4): 8x A100 SXM4 40GB on NVLink 3 / NVSwitch, 96 vCPU AMD EPYC 7V12 (Rome), 900 GiB RAM, 6000 GiB temp NVMe, 8x 200 Gb/s HDR InfiniBand (one per GPU, GPUDirect RDMA). (Microsoft's page writes \"200 GB/s\"; HDR is 200 Gb/s.)",
  "gpu": "a100-40g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "200Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "900GiB",
  "nvme": "6000GiB",
  "nvme_bandwidth": "10GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndasra100v4-series",
   "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/sizes/gpu-accelerated/includes/ndasra100v4-series-summary.md"
  ]
 },
 "azure-ndm-a100-v4": {
  "description": "Azure Standard_ND96amsr_A100_v4 (NDm A100 v4): 8x A100 SXM4 80GB on NVLink 3 / NVSwitch, 96 vCPU AMD EPYC 7V12 (Rome), 1900 GB RAM, 6400 GiB temp NVMe, 8x 200 Gb/s HDR InfiniBand.",
  "gpu": "a100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "200Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "1900GiB",
  "nvme": "6400GiB",
  "nvme_bandwidth": "10GB/s",
  "pcie_generation": 4,
  "sources": [
   "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndma100v4-series",
   "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/sizes/gpu-accelerated/includes/ndma100v4-series-summary.md"
  ]
 },
 "azure-nd-h100-v5": {
  "description": "Azure Standard_ND96isr_H100_v5 (ND H100 v5): 8x H100 SXM 80GB on NVLink 4 / NVSwitch, 96 vCPU 4th Gen Xeon (Sapphire Rapids), 1900 GiB RAM, 28000 GiB temp NVMe, 8x 400 Gb/s NDR InfiniBand (3.2 Tb/s per VM, one per GPU).",
  "gpu": "h100-80g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "1900GiB",
  "nvme": "28000GiB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh100v5-series",
   "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/sizes/gpu-accelerated/includes/ndh100v5-series-summary.md"
  ]
 },
 "azure-nd-h200-v5": {
  "description": "Azure Standard_ND96isr_H200_v5 (ND H200 v5): 8x H200 141GB on NVLink 4 / NVSwitch, 96 vCPU Sapphire Rapids, 1850 GiB RAM, 28000 GiB temp NVMe, 8x 400 Gb/s NDR InfiniBand.",
  "gpu": "h200-141g",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "1850GiB",
  "nvme": "28000GiB",
  "nvme_bandwidth": "25GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-h200-v5-series",
   "https://aspire.dev/reference/api/csharp/aspire.hosting.azure.kubernetes/standardndisrh200v5/fields.md (96 vCPUs, 1850 GB RAM, 8 GPUs)"
  ]
 },
 "azure-nd-mi300x-v5": {
  "description": "Azure Standard_ND96isr_MI300X_v5 (ND MI300X v5): 8x AMD MI300X 192GB on 4th-Gen Infinity Fabric (128 GB/s per link, 896 GB/s aggregate per GPU), 96 vCPU 4th Gen Xeon (Sapphire Rapids), 1850 GiB RAM, 1000 GiB local temp disk, 8x 400 Gb/s NDR InfiniBand (one per GPU).",
  "gpu": "mi300x",
  "gpus_per_node": 8,
  "inter_node_bandwidth_per_gpu": "400Gb/s",
  "inter_node_latency_us": 5.0,
  "cpu_memory": "1850GiB",
  "nvme": "1000GiB",
  "nvme_bandwidth": "2GB/s",
  "pcie_generation": 5,
  "sources": [
   "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndmi300xv5-series",
   "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/sizes/gpu-accelerated/includes/nd-mi300x-v5-series-specs.md",
   "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/virtual-machines/sizes/gpu-accelerated/includes/ndmi300xv5-series-summary.md"
  ]
 }
}

MODELS = {
 "gpt2": {
  "description": "GPT-2 small (124M), OpenAI 2019. Learned positions, LayerNorm, biases, tied head.",
  "family": "gpt2",
  "params": 124439808,
  "largest_layer_params": 38597376,
  "layers": 12,
  "hidden": 768,
  "heads": 12,
  "kv_heads": 12,
  "ffn": 3072,
  "vocab": 50257,
  "max_seq_len": 1024,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "gpt2",
   "n_positions": 1024,
   "n_ctx": 1024,
   "n_inner": null,
   "activation_function": "gelu_new",
   "tie_word_embeddings": true
  },
  "sources": [
   "https://huggingface.co/openai-community/gpt2",
   "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
   "zeroplan docs/formulas.md §19.2 (GPT-2 124,439,808)"
  ]
 },
 "gpt2-xl": {
  "description": "GPT-2 XL (1.5B), OpenAI 2019. Same block as GPT-2 small, 48 layers of width 1600.",
  "family": "gpt2",
  "params": 1557611200,
  "largest_layer_params": 80411200,
  "layers": 48,
  "hidden": 1600,
  "heads": 25,
  "kv_heads": 25,
  "ffn": 6400,
  "vocab": 50257,
  "max_seq_len": 1024,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "gpt2",
   "n_positions": 1024,
   "n_ctx": 1024,
   "n_inner": null,
   "activation_function": "gelu_new",
   "tie_word_embeddings": true
  },
  "sources": [
   "https://huggingface.co/openai-community/gpt2-xl",
   "https://huggingface.co/openai-community/gpt2-xl/blob/main/config.json"
  ]
 },
 "gpt3-175b": {
  "description": "GPT-3 175B (Brown et al. 2020, Table 2.1: L=96, h=12288, 96 heads, context 2048), counted as a GPT-2-style decoder: BPE vocab 50257, learned positions, pre-LayerNorm, biases, tied head. Family gpt2 because Hugging Face has no gpt3 model_type and the parameter layout is GPT-2's; GPT-3's alternating locally banded sparse attention adds no parameters. The weights were never released.",
  "family": "gpt2",
  "params": 174604259328,
  "largest_layer_params": 617558016,
  "layers": 96,
  "hidden": 12288,
  "heads": 96,
  "kv_heads": 96,
  "ffn": 49152,
  "vocab": 50257,
  "max_seq_len": 2048,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "gpt2",
   "n_positions": 2048,
   "n_ctx": 2048,
   "n_inner": null,
   "tie_word_embeddings": true
  },
  "sources": [
   "https://arxiv.org/abs/2005.14165"
  ]
 },
 "llama-2-7b": {
  "description": "Llama 2 7B (Meta 2023). RMSNorm, SwiGLU, RoPE, multi-head attention, untied head.",
  "family": "llama",
  "params": 6738415616,
  "largest_layer_params": 131072000,
  "layers": 32,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 32,
  "ffn": 11008,
  "vocab": 32000,
  "max_seq_len": 4096,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 4096,
   "rope_theta": 10000.0,
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Llama-2-7b-hf",
   "https://arxiv.org/abs/2307.09288",
   "zeroplan docs/formulas.md §19.2 (Llama-2-7B 6,738,415,616)"
  ]
 },
 "llama-2-13b": {
  "description": "Llama 2 13B (Meta 2023). Same block as 7B, h=5120, 40 layers.",
  "family": "llama",
  "params": 13015864320,
  "largest_layer_params": 163840000,
  "layers": 40,
  "hidden": 5120,
  "heads": 40,
  "kv_heads": 40,
  "ffn": 13824,
  "vocab": 32000,
  "max_seq_len": 4096,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 4096,
   "rope_theta": 10000.0,
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Llama-2-13b-hf",
   "https://arxiv.org/abs/2307.09288"
  ]
 },
 "llama-2-70b": {
  "description": "Llama 2 70B (Meta 2023). Grouped-query attention with 8 KV heads.",
  "family": "llama",
  "params": 68976648192,
  "largest_layer_params": 262144000,
  "layers": 80,
  "hidden": 8192,
  "heads": 64,
  "kv_heads": 8,
  "ffn": 28672,
  "vocab": 32000,
  "max_seq_len": 4096,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 4096,
   "rope_theta": 10000.0,
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Llama-2-70b-hf",
   "https://arxiv.org/abs/2307.09288"
  ]
 },
 "llama-3-8b": {
  "description": "Meta Llama 3 8B (2024). GQA with 8 KV heads, 128K-token vocabulary.",
  "family": "llama",
  "params": 8030261248,
  "largest_layer_params": 525336576,
  "layers": 32,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 8,
  "ffn": 14336,
  "vocab": 128256,
  "max_seq_len": 8192,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 8192,
   "rope_theta": 500000.0,
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Meta-Llama-3-8B",
   "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"
  ]
 },
 "llama-3-70b": {
  "description": "Meta Llama 3 70B (2024). GQA with 8 KV heads, 128K-token vocabulary.",
  "family": "llama",
  "params": 70553706496,
  "largest_layer_params": 1050673152,
  "layers": 80,
  "hidden": 8192,
  "heads": 64,
  "kv_heads": 8,
  "ffn": 28672,
  "vocab": 128256,
  "max_seq_len": 8192,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 8192,
   "rope_theta": 500000.0,
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Meta-Llama-3-70B",
   "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json"
  ]
 },
 "llama-3.1-405b": {
  "description": "Meta Llama 3.1 405B (2024). 126 layers, h=16384, GQA with 8 KV heads, 128K context.",
  "family": "llama",
  "params": 405853388800,
  "largest_layer_params": 2101346304,
  "layers": 126,
  "hidden": 16384,
  "heads": 128,
  "kv_heads": 8,
  "ffn": 53248,
  "vocab": 128256,
  "max_seq_len": 131072,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "llama",
   "hidden_act": "silu",
   "max_position_embeddings": 131072,
   "rope_theta": 500000.0,
   "rope_scaling": {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192
   },
   "attention_bias": false,
   "mlp_bias": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Llama-3.1-405B",
   "https://arxiv.org/abs/2407.21783"
  ]
 },
 "bloom-176b": {
  "description": "BigScience BLOOM 176B (2022). ALiBi (no position embeddings), LayerNorm after the word embeddings, biases everywhere, tied head, 250,880-token vocabulary.",
  "family": "bloom",
  "params": 176247271424,
  "largest_layer_params": 3596615680,
  "layers": 70,
  "hidden": 14336,
  "heads": 112,
  "kv_heads": 112,
  "ffn": 57344,
  "vocab": 250880,
  "max_seq_len": 2048,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "bloom",
   "apply_residual_connection_post_layernorm": false,
   "tie_word_embeddings": true
  },
  "sources": [
   "https://huggingface.co/bigscience/bloom",
   "https://arxiv.org/abs/2211.05100"
  ]
 },
 "mixtral-8x7b": {
  "description": "Mistral AI Mixtral 8x7B (2023). Sparse MoE: 8 SwiGLU experts per layer, top-2 routing, GQA with 8 KV heads; 46.7B parameters in all, about 12.9B active per token.",
  "family": "mixtral",
  "params": 46702792704,
  "largest_layer_params": 1409286144,
  "layers": 32,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 8,
  "ffn": 14336,
  "vocab": 32000,
  "max_seq_len": 32768,
  "tied_embeddings": false,
  "experts": 8,
  "experts_per_token": 2,
  "config": {
   "model_type": "mixtral",
   "num_local_experts": 8,
   "num_experts_per_tok": 2,
   "head_dim": 128,
   "hidden_act": "silu",
   "max_position_embeddings": 32768,
   "rope_theta": 1000000.0,
   "sliding_window": null,
   "router_aux_loss_coef": 0.02,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1",
   "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
   "https://arxiv.org/abs/2401.04088"
  ]
 },
 "mistral-7b": {
  "description": "Mistral 7B v0.1 (2023). Llama-style block with GQA (8 KV heads), sliding-window attention.",
  "family": "mistral",
  "params": 7241732096,
  "largest_layer_params": 131072000,
  "layers": 32,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 8,
  "ffn": 14336,
  "vocab": 32000,
  "max_seq_len": 32768,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "mistral",
   "hidden_act": "silu",
   "max_position_embeddings": 32768,
   "sliding_window": 4096,
   "rope_theta": 10000.0,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/mistralai/Mistral-7B-v0.1",
   "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
   "https://arxiv.org/abs/2310.06825"
  ]
 },
 "qwen2-7b": {
  "description": "Qwen2 7B (Alibaba 2024). Llama-style block with biases on the q, k and v projections (hard-wired in transformers' Qwen2Attention, no config flag), GQA with 4 KV heads, 152,064-token embedding, untied head.",
  "family": "qwen2",
  "params": 7615616512,
  "largest_layer_params": 544997376,
  "layers": 28,
  "hidden": 3584,
  "heads": 28,
  "kv_heads": 4,
  "ffn": 18944,
  "vocab": 152064,
  "max_seq_len": 32768,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "qwen2",
   "hidden_act": "silu",
   "rope_theta": 1000000.0,
   "use_sliding_window": false,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/Qwen/Qwen2-7B",
   "https://huggingface.co/Qwen/Qwen2-7B-Instruct/blob/main/config.json",
   "https://arxiv.org/abs/2407.10671"
  ]
 },
 "opt-1.3b": {
  "description": "Meta OPT 1.3B (2022). Learned positions with an offset of 2 (2050 rows), pre-LayerNorm, ReLU MLP, biases everywhere, tied head.",
  "family": "opt",
  "params": 1315758080,
  "largest_layer_params": 102957056,
  "layers": 24,
  "hidden": 2048,
  "heads": 32,
  "kv_heads": 32,
  "ffn": 8192,
  "vocab": 50272,
  "max_seq_len": 2048,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "opt",
   "max_position_embeddings": 2048,
   "word_embed_proj_dim": 2048,
   "do_layer_norm_before": true,
   "enable_bias": true,
   "layer_norm_elementwise_affine": true,
   "activation_function": "relu",
   "tie_word_embeddings": true
  },
  "sources": [
   "https://huggingface.co/facebook/opt-1.3b",
   "https://huggingface.co/facebook/opt-1.3b/blob/main/config.json",
   "https://arxiv.org/abs/2205.01068"
  ]
 },
 "qwen3-8b": {
  "description": "Qwen3 8B (Alibaba, 2025). GQA with 8 KV heads, RMSNorm on queries and keys (qk-norm), untied head.",
  "family": "qwen3",
  "params": 8190735360,
  "largest_layer_params": 622329856,
  "layers": 36,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 8,
  "ffn": 12288,
  "vocab": 151936,
  "max_seq_len": 40960,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "qwen3",
   "head_dim": 128,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/Qwen/Qwen3-8B",
   "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json"
  ]
 },
 "qwen3-32b": {
  "description": "Qwen3 32B (Alibaba, 2025). 64 layers, GQA with 8 KV heads, qk-norm.",
  "family": "qwen3",
  "params": 32762123264,
  "largest_layer_params": 777912320,
  "layers": 64,
  "hidden": 5120,
  "heads": 64,
  "kv_heads": 8,
  "ffn": 25600,
  "vocab": 151936,
  "max_seq_len": 40960,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "qwen3",
   "head_dim": 128,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/Qwen/Qwen3-32B",
   "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json"
  ]
 },
 "qwen3-30b-a3b": {
  "description": "Qwen3 30B-A3B (Alibaba, 2025). MoE: 128 experts of width 768 in every layer, 8 per token; about 3.3B active.",
  "family": "qwen3_moe",
  "params": 30532122624,
  "largest_layer_params": 603979776,
  "layers": 48,
  "hidden": 2048,
  "heads": 32,
  "kv_heads": 4,
  "ffn": 6144,
  "vocab": 151936,
  "max_seq_len": 40960,
  "tied_embeddings": false,
  "experts": 128,
  "experts_per_token": 8,
  "config": {
   "model_type": "qwen3_moe",
   "head_dim": 128,
   "moe_intermediate_size": 768,
   "num_experts": 128,
   "decoder_sparse_step": 1,
   "mlp_only_layers": [],
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/Qwen/Qwen3-30B-A3B",
   "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"
  ]
 },
 "qwen3-235b-a22b": {
  "description": "Qwen3 235B-A22B (Alibaba, 2025). MoE: 128 experts of width 1536 in all 94 layers, 8 per token; about 22B active.",
  "family": "qwen3_moe",
  "params": 235093634560,
  "largest_layer_params": 2415919104,
  "layers": 94,
  "hidden": 4096,
  "heads": 64,
  "kv_heads": 4,
  "ffn": 12288,
  "vocab": 151936,
  "max_seq_len": 40960,
  "tied_embeddings": false,
  "experts": 128,
  "experts_per_token": 8,
  "config": {
   "model_type": "qwen3_moe",
   "head_dim": 128,
   "moe_intermediate_size": 1536,
   "num_experts": 128,
   "decoder_sparse_step": 1,
   "mlp_only_layers": [],
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/Qwen/Qwen3-235B-A22B",
   "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json"
  ]
 },
 "deepseek-v3": {
  "description": "DeepSeek-V3 (2024). Multi-head latent attention; 3 dense layers then 58 MoE layers of 256 routed experts (8 per token) and 1 shared expert; about 37B active. The multi-token-prediction layer is not built by transformers and not counted.",
  "family": "deepseek_v3",
  "params": 671026404352,
  "largest_layer_params": 11274289152,
  "layers": 61,
  "hidden": 7168,
  "heads": 128,
  "kv_heads": 128,
  "ffn": 18432,
  "vocab": 129280,
  "max_seq_len": 163840,
  "tied_embeddings": false,
  "experts": 256,
  "experts_per_token": 8,
  "config": {
   "model_type": "deepseek_v3",
   "moe_intermediate_size": 2048,
   "n_routed_experts": 256,
   "n_shared_experts": 1,
   "first_k_dense_replace": 3,
   "q_lora_rank": 1536,
   "kv_lora_rank": 512,
   "qk_rope_head_dim": 64,
   "qk_nope_head_dim": 128,
   "v_head_dim": 128,
   "num_nextn_predict_layers": 1,
   "n_group": 8,
   "topk_group": 4,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/deepseek-ai/DeepSeek-V3",
   "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
   "https://arxiv.org/abs/2412.19437"
  ]
 },
 "gpt-oss-20b": {
  "description": "OpenAI gpt-oss-20b (2025). MoE: 32 experts with biases, 4 per token; attention sinks; sliding (128) and global layers alternate.",
  "family": "gpt_oss",
  "params": 20914757184,
  "largest_layer_params": 796538880,
  "layers": 24,
  "hidden": 2880,
  "heads": 64,
  "kv_heads": 8,
  "ffn": 2880,
  "vocab": 201088,
  "max_seq_len": 131072,
  "tied_embeddings": false,
  "experts": 32,
  "experts_per_token": 4,
  "config": {
   "model_type": "gpt_oss",
   "head_dim": 64,
   "sliding_window": 128,
   "layer_types": [
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention"
   ],
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/openai/gpt-oss-20b",
   "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json"
  ]
 },
 "gpt-oss-120b": {
  "description": "OpenAI gpt-oss-120b (2025). MoE: 128 experts with biases, 4 per token, 36 layers; attention sinks; sliding (128) and global layers alternate.",
  "family": "gpt_oss",
  "params": 116829156672,
  "largest_layer_params": 3186155520,
  "layers": 36,
  "hidden": 2880,
  "heads": 64,
  "kv_heads": 8,
  "ffn": 2880,
  "vocab": 201088,
  "max_seq_len": 131072,
  "tied_embeddings": false,
  "experts": 128,
  "experts_per_token": 4,
  "config": {
   "model_type": "gpt_oss",
   "head_dim": 64,
   "sliding_window": 128,
   "layer_types": [
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "full_attention"
   ],
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/openai/gpt-oss-120b",
   "https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json"
  ]
 },
 "gemma-3-27b": {
  "description": "Google Gemma 3 27B (2025), its text model (the SigLIP vision tower is not counted). Five sliding-window (1024) layers per global one, qk-norm, four norms per layer, tied head.",
  "family": "gemma3_text",
  "params": 27009346304,
  "largest_layer_params": 1409630208,
  "layers": 62,
  "hidden": 5376,
  "heads": 32,
  "kv_heads": 16,
  "ffn": 21504,
  "vocab": 262208,
  "max_seq_len": 131072,
  "tied_embeddings": true,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "gemma3_text",
   "head_dim": 128,
   "sliding_window": 1024,
   "tie_word_embeddings": true
  },
  "sources": [
   "https://huggingface.co/google/gemma-3-27b-pt",
   "https://huggingface.co/google/gemma-3-27b-pt/blob/main/config.json"
  ]
 },
 "llama-4-scout": {
  "description": "Meta Llama 4 Scout 17B-16E (2025), its text model (the vision tower is not counted). MoE: 16 experts and a shared expert in every layer, 1 routed per token.",
  "family": "llama4_text",
  "params": 107769861120,
  "largest_layer_params": 2013265920,
  "layers": 48,
  "hidden": 5120,
  "heads": 40,
  "kv_heads": 8,
  "ffn": 8192,
  "vocab": 202048,
  "max_seq_len": 10485760,
  "tied_embeddings": false,
  "experts": 16,
  "experts_per_token": 1,
  "config": {
   "model_type": "llama4_text",
   "head_dim": 128,
   "intermediate_size_mlp": 16384,
   "interleave_moe_layer_step": 1,
   "use_qk_norm": true,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E",
   "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E/blob/main/config.json"
  ]
 },
 "olmo-2-7b": {
  "description": "AllenAI OLMo 2 7B (November 2024). Norms after attention and MLP, qk-norm over all heads, untied head.",
  "family": "olmo2",
  "params": 7298617344,
  "largest_layer_params": 411041792,
  "layers": 32,
  "hidden": 4096,
  "heads": 32,
  "kv_heads": 32,
  "ffn": 11008,
  "vocab": 100352,
  "max_seq_len": 4096,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "olmo2",
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/allenai/OLMo-2-1124-7B",
   "https://huggingface.co/allenai/OLMo-2-1124-7B/blob/main/config.json"
  ]
 },
 "olmo-2-13b": {
  "description": "AllenAI OLMo 2 13B (November 2024). Norms after attention and MLP, qk-norm over all heads, untied head.",
  "family": "olmo2",
  "params": 13716198400,
  "largest_layer_params": 513802240,
  "layers": 40,
  "hidden": 5120,
  "heads": 40,
  "kv_heads": 40,
  "ffn": 13824,
  "vocab": 100352,
  "max_seq_len": 4096,
  "tied_embeddings": false,
  "experts": null,
  "experts_per_token": null,
  "config": {
   "model_type": "olmo2",
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/allenai/OLMo-2-1124-13B",
   "https://huggingface.co/allenai/OLMo-2-1124-13B/blob/main/config.json"
  ]
 },
 "glm-4.5": {
  "description": "Zhipu GLM-4.5 (2025). 3 dense layers then 89 MoE layers of 160 routed experts (8 per token) and 1 shared expert, qk-norm; the multi-token-prediction layer is not built by transformers and not counted.",
  "family": "glm4_moe",
  "params": 352797814784,
  "largest_layer_params": 3774873600,
  "layers": 92,
  "hidden": 5120,
  "heads": 96,
  "kv_heads": 8,
  "ffn": 12288,
  "vocab": 151552,
  "max_seq_len": 131072,
  "tied_embeddings": false,
  "experts": 160,
  "experts_per_token": 8,
  "config": {
   "model_type": "glm4_moe",
   "head_dim": 128,
   "moe_intermediate_size": 1536,
   "n_routed_experts": 160,
   "n_shared_experts": 1,
   "first_k_dense_replace": 3,
   "attention_bias": true,
   "use_qk_norm": true,
   "num_nextn_predict_layers": 1,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/zai-org/GLM-4.5",
   "https://huggingface.co/zai-org/GLM-4.5/blob/main/config.json"
  ]
 },
 "glm-4.5-air": {
  "description": "Zhipu GLM-4.5-Air (2025). 1 dense layer then 45 MoE layers of 128 routed experts (8 per token) and 1 shared expert; the multi-token-prediction layer is not counted.",
  "family": "glm4_moe",
  "params": 106852245504,
  "largest_layer_params": 2214592512,
  "layers": 46,
  "hidden": 4096,
  "heads": 96,
  "kv_heads": 8,
  "ffn": 10944,
  "vocab": 151552,
  "max_seq_len": 131072,
  "tied_embeddings": false,
  "experts": 128,
  "experts_per_token": 8,
  "config": {
   "model_type": "glm4_moe",
   "head_dim": 128,
   "moe_intermediate_size": 1408,
   "n_routed_experts": 128,
   "n_shared_experts": 1,
   "first_k_dense_replace": 1,
   "attention_bias": true,
   "use_qk_norm": false,
   "num_nextn_predict_layers": 1,
   "tie_word_embeddings": false
  },
  "sources": [
   "https://huggingface.co/zai-org/GLM-4.5-Air",
   "https://huggingface.co/zai-org/GLM-4.5-Air/blob/main/config.json"
  ]
 }
}

del true, false, null
